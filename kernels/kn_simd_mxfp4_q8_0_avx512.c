/* kernels/kn_simd_mxfp4_q8_0_avx512.c — the AVX-512 kernels of the 32-value block formats, MXFP4
 * and Q8_0, which share a streaming kernel and a register tile: MXFP4 up to 16 tokens streamed
 * (each stored row read once per pass of up to 8 tokens, its weights decoded with byte permutes
 * straight into the interleaved layout of kn_simd_x86.h and applied to every token in registers:
 * an expert's few rows of a decode batch cost little more than one; a pinned matrix is read from
 * its packed copy, whose groups are stored in decode order so the gathers are skipped), Q8_0 up
 * to 8 tokens by the same kernel (its groups transposed in registers), MXFP4 and Q8_0 batches
 * beyond that (a tile of rows decoded once, two rows per 512-bit vector, the next tile decoded
 * while this one is used), and both formats' packed copies (kn_pack; a pinned Q8_0 matrix's are
 * the tile's decoded pairs, streamed by one token and read by the tile from 7 tokens on). The
 * integer sums are exact and every lane's float work is the canonical one: the bits equal the
 * scalar reference's. */
#include "kernels/kn_simd_avx512.h"

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
/* Bytes 4j and 32 + 4j pick e of block j (at 17j); the other bytes of each dword are zeroed by
 * the mask. */
static const uint8_t mxfp4_e_idx[64] = {
#define E4(j) 17 * j, 0, 0, 0
#define E32   E4(0), E4(1), E4(2), E4(3), E4(4), E4(5), E4(6), E4(7)
    E32, E32
#undef E32
#undef E4
};
#define KN_MASK_BYTE0_OF_8_DWORDS  0x11111111ull
#define KN_MASK_BYTE0_OF_16_DWORDS 0x1111111111111111ull

/* The biased codes (kvalue + 12) repeated 4 times: vpermb reads 6 index bits, so the nibble's
 * neighbours in bits 4-5 select the same value and no mask is needed. */
static const int8_t mxfp4_lut64[64] = {
#define LUT 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0
    LUT, LUT, LUT, LUT
#undef LUT
};

/* A packed copy (kn_pack) keeps each full group of 8 blocks in the order these gathers leave it:
 * the 64 bytes of za, the 64 of zb, then the 8 exponents as e - 128 in int8 (e ^ 0x80: one sign
 * extension makes them vscalefps's exponents); 136 bytes, as stored; the tail group as stored.
 * Decoding it needs no gathers. */
#define MX_GROUP_E 128 /* the exponents' offset in a packed group */

/* One full group of 8 blocks decoded in registers: the biased codes in the interleaved layout of
 * kn_simd_x86.h (w[0] = [dwords 0 | 1] of the 8 blocks' low nibbles, w[1] = [2 | 3], w[2] and w[3]
 * the high nibbles alike: the 256 bytes of kn__x86_decode_mxfp4's group, in order); returns the
 * exponents as e - 128 (dword j = block j, and dword 8 + j too when the mask keeps it; stored
 * rows: -128 in the dwords it drops). `packed`: the group is a packed copy's (a constant once
 * inlined). */
static inline __attribute__((always_inline)) __m512i mxfp4_codes_e(const uint8_t *row, __m512i w[4],
                                                                   __mmask64 keep,
                                                                   const bool packed,
                                                                   const bool once) {
    const __m512i lut = _mm512_loadu_si512(mxfp4_lut64);
    __m512i za, zb, e;
    if (packed) {
        za = _mm512_loadu_si512(row);
        zb = _mm512_loadu_si512(row + 64);
        uint64_t e8;
        memcpy(&e8, row + MX_GROUP_E, sizeof e8);
        e = _mm512_cvtepi8_epi32(_mm_set1_epi64x((long long)e8)); /* dwords j and 8 + j */
    } else {
        const __m512i qidx = _mm512_loadu_si512(mxfp4_qs_idx);
        __m512i w0 = _mm512_loadu_si512(row), w1 = _mm512_loadu_si512(row + 64);
        /* `once`: loaded once for both permutes that read them, where the compiler would load
         * them again as memory operands: a 512-bit load across two cache lines (as these are)
         * takes the load paths longer than an aligned one, and one row at a time the loads bound
         * the kernel (with two rows, registers are short and the reloads cost less) */
        if (once) __asm__("" : "+v"(w0), "+v"(w1));
        za = _mm512_permutex2var_epi8(w0, qidx, w1); /* dwords 0, 1 */
        zb = _mm512_permutex2var_epi8(_mm512_loadu_si512(row + 8), qidx,
                                      _mm512_loadu_si512(row + 72)); /* dwords 2, 3 */
        e = _mm512_sub_epi32(
            _mm512_maskz_permutex2var_epi8(keep, w0, _mm512_loadu_si512(mxfp4_e_idx), w1),
            _mm512_set1_epi32(128));
    }
    w[0] = _mm512_permutexvar_epi8(za, lut);
    w[1] = _mm512_permutexvar_epi8(zb, lut);
    w[2] = _mm512_permutexvar_epi8(_mm512_srli_epi16(za, 4), lut);
    w[3] = _mm512_permutexvar_epi8(_mm512_srli_epi16(zb, 4), lut);
    return e;
}

/* The codes and the exponents e - 128 as floats (lane j = block j). */
static inline __attribute__((always_inline)) void mxfp4_codes(const uint8_t *row, __m512i w[4],
                                                              __m256 *ef, const bool packed) {
    const __m512i e = mxfp4_codes_e(row, w, KN_MASK_BYTE0_OF_8_DWORDS, packed, false);
    *ef = _mm256_cvtepi32_ps(_mm512_castsi512_si256(e));
}

/* The same with the exponents in both halves (lanes j and 8 + j = block j), for kernels that
 * apply a group to two tokens at once. */
static inline __attribute__((always_inline)) void
mxfp4_codes2(const uint8_t *row, __m512i w[4], __m512 *ef, const bool packed, const bool once) {
    const __m512i e = mxfp4_codes_e(row, w, KN_MASK_BYTE0_OF_16_DWORDS, packed, once);
    *ef = _mm512_cvtepi32_ps(e);
}

/* A pair's decoded bytes (MXFP4): per group the 8 vectors of both rows ([a | b], 64 bytes each),
 * then the group's 8 scales of a and of b as floats. Row h (0, 1) of the pair has vector k of
 * group g at + MX_PAIR_GROUP g + 64 k + 32 h, its scales at + MX_PAIR_GROUP g + MX_PAIR_SC + 32 h;
 * the tail group is padded to 8 blocks. Each group's scales follow its vectors so that one
 * token's stream over a packed matrix is one sequential read: with every scale in a region of its
 * own after the vectors, the two streams a few KiB apart read at under half a plain read's rate.
 * (MXFP4's scales 2^(e - 128) leave fp16's range, so they stay floats.) */
#define MX_PAIR_SC    (2 * KN__X86_GROUP_QS)
#define MX_PAIR_GROUP (MX_PAIR_SC + 64)
static inline size_t mx_pair_bytes(int64_t k) {
    return 2 * kn__x86_mxfp4_row_bytes(k); /* = MX_PAIR_GROUP ng */
}

/* Q8_0's pairs (the batch tile's decoded rows and the packed copy alike): the full groups as
 * MXFP4's but with the 16 scales as the file's fp16 d (8 of a, then 8 of b: 32 bytes), and the
 * tail group of n < 8 blocks kept to its blocks: 8 vectors of 8n bytes (row a's 4n then row b's
 * 4n: dwords 0 .. n-1 of the full layout's halves), then the 2n scales (a's n, b's n). A pair is
 * then exactly two stored rows (68 bytes a block), so the packed copy is the stored size and one
 * token streams it no slower than the stored rows. fp16 -> float is exact: the bits do not
 * change. */
#define Q8P_SC    (2 * KN__X86_GROUP_QS)
#define Q8P_GROUP (Q8P_SC + 32)
static inline size_t q8p_pair_bytes(int64_t k) {
    return (size_t)(k / KN__QK32) * 2 * KN__Q8_0_BYTES; /* Q8P_GROUP per full group */
}

/* How a pair's tail group of `left` blocks is read into the full layout's lanes: one masked load
 * of a vector's 8 * left bytes and a byte permute putting row b's 4 * left at byte 32, the rest
 * zeroed (a zero code meets a zero activation: the lane's sum is its zero bias; a zero scale
 * makes its product 0, as the padded layout's); the scales alike with a word permute. */
typedef struct q8p_tail {
    size_t vb; /* bytes of one of its vectors: 8 * left */
    __m512i idx;
    __mmask64 ld, keep;
    __m256i sidx;
    __mmask16 sld, skeep;
} q8p_tail;

static inline q8p_tail q8p_tail_of(int left) {
    static const uint8_t lo32[64] = {
#define I8(i) i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7
        I8(0), I8(8),  I8(16), I8(24), I8(0),
        I8(8), I8(16), I8(24)
#undef I8
    };
    static const uint16_t lo8[16] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
    const uint64_t half = (1ull << (4 * left)) - 1;
    const unsigned sh = (1u << left) - 1;
    return (q8p_tail){
        .vb = 8 * (size_t)left,
        .idx = _mm512_add_epi8(_mm512_loadu_si512(lo32),
                               _mm512_maskz_set1_epi8(0xFFFFFFFF00000000ull, (char)(4 * left))),
        .ld = (1ull << (8 * left)) - 1,
        .keep = half | half << 32,
        .sidx = _mm256_add_epi16(_mm256_loadu_si256((const __m256i *)lo8),
                                 _mm256_maskz_set1_epi16(0xFF00, (short)left)),
        .sld = (__mmask16)((1u << (2 * left)) - 1),
        .skeep = (__mmask16)(sh | sh << 8)};
}

/* Vector k of a tail group at t0, and its scales. */
static inline __attribute__((always_inline)) __m512i q8p_tail_vec(const uint8_t *t0, int k,
                                                                  const q8p_tail *t) {
    return _mm512_maskz_permutexvar_epi8(t->keep, t->idx,
                                         _mm512_maskz_loadu_epi8(t->ld, t0 + (size_t)k * t->vb));
}
static inline __attribute__((always_inline)) __m512 q8p_tail_scales(const uint8_t *t0,
                                                                    const q8p_tail *t) {
    return _mm512_cvtph_ps(_mm256_maskz_permutexvar_epi16(
        t->skeep, t->sidx, _mm256_maskz_loadu_epi16(t->sld, t0 + 8 * t->vb)));
}
/* A full group's 16 scales. */
static inline __attribute__((always_inline)) __m512 q8p_scales(const uint8_t *g) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + Q8P_SC)));
}

/* One row's decoded group (w[i] = its vectors 2i and 2i + 1) into its half of the pair's group. */
static inline void mx_store_pair(uint8_t *q, const __m512i w[4]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_si256((__m256i *)(q + 128 * i), _mm512_castsi512_si256(w[i]));
        _mm256_storeu_si256((__m256i *)(q + 128 * i + 64), _mm512_extracti64x4_epi64(w[i], 1));
    }
}

/* Group g of a stored MXFP4 row decoded as kn__x86_decode_mxfp4 decodes it, with the byte permutes
 * above, into the row's half of a pair (dst: the row's start in the pair): codes, then
 * h(e) = 2^(e - 128) per block (exact: vscalef of 1). The tail group is read in place when its
 * window lies before `end`, as the streaming kernel reads it: its blocks past the row meet zero
 * activations and d_x = 0, so their codes add 0 to the block sums and their scales give
 * d_x * h(e) = 0, as the zero-padded copy (used at the matrix's end) gives. */
static void mxfp4_tail_codes(const uint8_t *src, int64_t blocks, __m512i w[4], __m256 *ef) {
    _Alignas(64) uint8_t pad[8 * KN__MXFP4_BYTES + 56] = {0};
    memcpy(pad, src, (size_t)blocks * KN__MXFP4_BYTES);
    mxfp4_codes(pad, w, ef, false);
}

/* A full group (g < k / 256) of the row at `row`: the steps of a batch tile take only these. */
static inline __attribute__((always_inline)) void mxfp4_dec_full_as(const uint8_t *row, int64_t ng,
                                                                    uint8_t *pair, int h, int64_t g,
                                                                    const bool packed) {
    uint8_t *dst = pair + 32 * h;
    const uint8_t *src = row + g * 8 * KN__MXFP4_BYTES;
    __m512i w[4];
    __m256 ef;
    kn__x86_prefetch(src, 8 * KN__MXFP4_BYTES);
    mxfp4_codes(src, w, &ef, packed);
    mx_store_pair(dst + g * MX_PAIR_GROUP, w);
    _mm256_storeu_ps((float *)(dst + g * MX_PAIR_GROUP + MX_PAIR_SC),
                     _mm256_scalef_ps(_mm256_set1_ps(1.0f), ef));
}
static inline __attribute__((always_inline)) void mxfp4_dec_full(const uint8_t *row, int64_t ng,
                                                                 uint8_t *pair, int h, int64_t g) {
    mxfp4_dec_full_as(row, ng, pair, h, g, false);
}
static inline __attribute__((always_inline)) void mxfp4p_dec_full(const uint8_t *row, int64_t ng,
                                                                  uint8_t *pair, int h, int64_t g) {
    mxfp4_dec_full_as(row, ng, pair, h, g, true);
}

/* Any group; a packed row's tail group is as stored. */
static inline __attribute__((always_inline)) void mxfp4_dec_group_as(const uint8_t *row, int64_t k,
                                                                     const uint8_t *end,
                                                                     uint8_t *pair, int h,
                                                                     int64_t g, const bool packed) {
    const int64_t nb = k / KN__QK32, ng = kn__x86_groups(k);
    if (g < nb / 8) {
        mxfp4_dec_full_as(row, ng, pair, h, g, packed);
        return;
    }
    uint8_t *dst = pair + 32 * h;
    const uint8_t *src = row + g * 8 * KN__MXFP4_BYTES;
    __m512i w[4];
    __m256 ef;
    if (end - src >= 8 * KN__MXFP4_BYTES)
        mxfp4_codes(src, w, &ef, false);
    else
        mxfp4_tail_codes(src, nb - 8 * g, w, &ef);
    mx_store_pair(dst + g * MX_PAIR_GROUP, w);
    _mm256_storeu_ps((float *)(dst + g * MX_PAIR_GROUP + MX_PAIR_SC),
                     _mm256_scalef_ps(_mm256_set1_ps(1.0f), ef));
}
static void mxfp4_dec_group(const uint8_t *row, int64_t k, const uint8_t *end, uint8_t *pair, int h,
                            int64_t g) {
    mxfp4_dec_group_as(row, k, end, pair, h, g, false);
}
static void mxfp4p_dec_group(const uint8_t *row, int64_t k, const uint8_t *end, uint8_t *pair,
                             int h, int64_t g) {
    mxfp4_dec_group_as(row, k, end, pair, h, g, true);
}

/* One full group of 8 stored Q8_0 blocks (272 bytes) in registers, in the interleaved layout of
 * kn_simd_x86.h with the weights made unsigned (+128: the sign bit flipped, as vpdpbusd wants them;
 * the prepared tokens carry -128 * sum(q) per block): u[i] = [vector 2i | vector 2i + 1], like
 * mxfp4_codes_e's w. The 8 x 8 transpose of the blocks' dwords, 4 blocks' halves per 128-bit
 * lane. */
static inline __attribute__((always_inline)) void q8_0_codes_u8(const uint8_t *row, __m512i u[4]) {
    __m512i a[4], t[4], v[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* lanes: block j bytes 0..15, 16..31, block j + 4 alike */
        const uint8_t *b = row + KN__Q8_0_BYTES * j + 2;
        a[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b)),
                                  _mm256_loadu_si256((const __m256i *)(b + 4 * KN__Q8_0_BYTES)), 1);
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
    for (int i = 0; i < 4; i++) u[i] = _mm512_xor_si512(o[i], flip);
}

/* ---- MXFP4 rows against a few tokens: the stored row streamed once --------------------------- */

/* Each group of 8 blocks is decoded in registers once and applied to every token (nt = 1 .. 8):
 * the weights are read from memory once whatever nt, and nothing is stored, so a few tokens (an
 * expert's share of a decode batch) cost little more than one. Two rows go together and each
 * token's group is loaded once for both: one row at a time, the tokens' loads (four 512-bit
 * vectors per token and group, as many as its vpdpbusd; a 512-bit load takes both load paths)
 * bound the kernel in L2, at one token too (from memory Q8_0 at one token is bound by the memory
 * and goes one row at a time: MX_FEW_NR). acc2[r][p] holds row r's block lanes of tokens 2p and
 * 2p + 1 side by side, acc1[r] those of an odd last token; a single token's two rows share
 * acc2[0][0] (row 0 in lanes 0-7, row 1 in 8-15: one float step for both). Every block's sum and
 * fma are the canonical ones, so a row gets the same bits alone or beside another. */

#define MX_FEW 8 /* tokens the streaming kernel takes at once */
_Static_assert(MX_FEW <= KN__X86_PASS_MAX, "kn__x86_few_passes takes up to 16 a pass");
/* Up to two passes of it rather than the batch tile: a pass stores nothing and decodes in
 * registers, so reading the rows twice still beats decoding a tile of them; past two passes the
 * tile's reuse wins on some CPUs, so larger batches take the tile everywhere. */
#define MX_FEW_PASSES 2

/* [a | b] (AVX-512F has no 32-bit-lane insert; the 64-bit one moves the same bits). */
static inline __m512 mx_join(__m256 a, __m256 b) {
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1));
}

/* 32 bytes at a in both halves. */
static inline __m512i mx_both(const void *a) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a));
}

#define MX_FEW_R 2 /* rows the streaming kernel takes at once */
/* Rows a pass takes. Q8_0 against one token goes one row at a time: its loop is faster than a
 * thread reads from memory, so from memory its pace is the memory's, and the memory serves one
 * stream of rows better than two a row apart (docs/kernels.md); in L2 the pair gains little. */
#define MX_FEW_NR(nt, lay) ((nt) == 1 && (lay) == MX_LAY_Q8_0 ? 1 : MX_FEW_R)
/* One token's two rows share one float step (MXFP4: its 512-bit vscalefps, measured faster than
 * two 256-bit ones and their lane adds; Q8_0's scale multiply measured faster per row). */
#define MX_PAIR_STEP(nr, nt, lay) ((nr) == 2 && (nt) == 1 && (lay) != MX_LAY_Q8_0)

/* x's group g: its 4 vectors, loaded once for every row of a pass (the compiler would otherwise
 * fold a load into each row's vpdpbusd: the tokens' loads, not the vpdpbusd, then bound the
 * kernel from two tokens on). */
static inline __attribute__((always_inline)) void mx_few_x(const uint8_t *x, int64_t g,
                                                           __m512i v[4], const int nr) {
    const __m512i *xv = (const __m512i *)(x + g * KN__X86_GROUP_QS);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        v[k] = _mm512_load_si512(xv + k);
        if (nr > 1) __asm__("" : "+v"(v[k]));
    }
}

/* What the streaming kernel reads: stored MXFP4 rows, a packed copy's (kn_pack), or stored Q8_0
 * rows. All three decode a group to the same interleaved unsigned bytes and leave the same kind of
 * block sums; they differ in the group's bytes and in the block's float scale. */
enum { MX_LAY_MXFP4, MX_LAY_MXFP4P, MX_LAY_Q8_0 };

static inline int mx_lay_group_bytes(const int lay) {
    return lay == MX_LAY_Q8_0 ? 8 * KN__Q8_0_BYTES : 8 * KN__MXFP4_BYTES;
}

/* A group's codes (w) and what its block scales are made from, in both halves (lanes j and 8 + j:
 * block j): MXFP4 the exponents e - 128, Q8_0 d_w (live: the row's blocks in this group; the
 * others get d_w = 0, as their fp16 bytes past the row could be inf or NaN). */
static inline __attribute__((always_inline)) void mx_lay_codes(const uint8_t *row, __m512i w[4],
                                                               __m512 *s2, const int lay, int live,
                                                               const bool once) {
    if (lay != MX_LAY_Q8_0) {
        mxfp4_codes2(row, w, s2, lay == MX_LAY_MXFP4P, once);
        return;
    }
    q8_0_codes_u8(row, w);
    __m256 dw = kn__x86_q8_0_d(row);
    if (live < 8) dw = _mm256_and_ps(dw, kn__x86_live_lanes(live));
    *s2 = mx_join(dw, dw);
}

/* The block scales from the tokens' d_x: MXFP4 d_x * h(e) as vscalef(d_x, e - 128), one rounding
 * of the exact product (h is exact for every e, subnormals included); Q8_0 d_w * d_x. */
static inline __attribute__((always_inline)) __m512 mx_lay_scale(__m512 dx, __m512 s2,
                                                                 const int lay) {
    return lay == MX_LAY_Q8_0 ? _mm512_mul_ps(dx, s2) : _mm512_scalef_ps(dx, s2);
}
static inline __attribute__((always_inline)) __m256 mx_lay_scale1(__m256 dx, __m512 s2,
                                                                  const int lay) {
    return lay == MX_LAY_Q8_0 ? _mm256_mul_ps(dx, _mm512_castps512_ps256(s2))
                              : _mm256_scalef_ps(dx, _mm512_castps512_ps256(s2));
}

/* One group g (decoded from each of the nr rows) against nt tokens, each token's group loaded once
 * for all the rows. Tokens go in pairs (a, b): per row, a's and b's vpdpbusd chains (from their
 * biases per block) leave block j's two halves in lanes j and 8 + j; a blend and a lane swap put
 * a's halves and b's halves side by side, so one add leaves the exact block sums of both in one
 * vector (a in lanes 0-7, b in 8-15) and the convert, the scales and the fma run once for the
 * pair, each lane's the canonical one of its (token, block): a third fewer instructions per token
 * than one token at a time. An odd last token runs alone on 256 bits. `live`: the row's blocks in
 * this group (8 but in a tail group). */
static inline __attribute__((always_inline)) void
mx_few_group(const uint8_t *const *row, const uint8_t *const *x, int64_t ng, int64_t g,
             __m512 (*acc2)[MX_FEW / 2], __m256 *acc1, const int nt, const int nr, const int lay,
             int live) {
    __m512i w[MX_FEW_R][4];
    __m512 s2[MX_FEW_R];
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) mx_lay_codes(row[r], w[r], &s2[r], lay, live, nr == 1);
#pragma GCC unroll 4
    for (int p = 0; p < nt / 2; p++) {
        const uint8_t *xa = x[2 * p], *xb = x[2 * p + 1];
        const float *dxa = (const float *)(xa + ng * KN__X86_GROUP_QS) + 8 * g;
        const float *dxb = (const float *)(xb + ng * KN__X86_GROUP_QS) + 8 * g;
        const __m512i ba =
            _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)(dxa + ng * 8)));
        const __m512i bb =
            _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)(dxb + ng * 8)));
        __m512i va[4], vb[4], sa[MX_FEW_R], sb[MX_FEW_R];
        mx_few_x(xa, g, va, nr);
        mx_few_x(xb, g, vb, nr);
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            sa[r] = ba, sb[r] = bb;
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                sa[r] = _mm512_dpbusd_epi32(sa[r], w[r][k], va[k]);
                sb[r] = _mm512_dpbusd_epi32(sb[r], w[r][k], vb[k]);
            }
        }
        const __m512 dx2 = mx_join(_mm256_load_ps(dxa), _mm256_load_ps(dxb));
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            /* [a.lo | b.hi] + [a.hi | b.lo]: lanes 0-7 token a's block sums, 8-15 token b's */
            const __m512i isum = _mm512_add_epi32(_mm512_mask_blend_epi64(0xF0, sa[r], sb[r]),
                                                  _mm512_shuffle_i64x2(sa[r], sb[r], 0x4E));
            acc2[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), mx_lay_scale(dx2, s2[r], lay),
                                         acc2[r][p]);
        }
    }
    if (nt & 1) {
        const uint8_t *xt = x[nt - 1];
        const float *dx = (const float *)(xt + ng * KN__X86_GROUP_QS) + 8 * g;
        const __m512i bt =
            _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)(dx + ng * 8)));
        __m512i v[4];
        mx_few_x(xt, g, v, nr);
        __m512i st[MX_FEW_R];
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            /* two chains of two: a group's sum waits for half the vpdpbusd latency, so more
             * groups fit in the scheduler at once (one token is bound by that latency) */
            __m512i su = _mm512_setzero_si512();
            st[r] = bt;
#pragma GCC unroll 2
            for (int k = 0; k < 4; k += 2) {
                st[r] = _mm512_dpbusd_epi32(st[r], w[r][k], v[k]);
                su = _mm512_dpbusd_epi32(su, w[r][k + 1], v[k + 1]);
            }
            st[r] = _mm512_add_epi32(st[r], su);
        }
        if (MX_PAIR_STEP(nr, nt, lay)) {
            /* one token, two rows: both rows' block sums in one vector (row 0 in lanes 0-7, row 1
             * in 8-15, as for a token pair) and one float step for the two, in acc2[0][0] */
            const __m512i isum = _mm512_add_epi32(_mm512_mask_blend_epi64(0xF0, st[0], st[1]),
                                                  _mm512_shuffle_i64x2(st[0], st[1], 0x4E));
            const __m512 sc = _mm512_castsi512_ps(_mm512_mask_blend_epi32(
                0xFF00, _mm512_castps_si512(s2[0]), _mm512_castps_si512(s2[1])));
            acc2[0][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                         mx_lay_scale(_mm512_castsi512_ps(mx_both(dx)), sc, lay),
                                         acc2[0][0]);
            return;
        }
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            const __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(st[r]),
                                                  _mm512_extracti64x4_epi64(st[r], 1));
            acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                      mx_lay_scale1(_mm256_load_ps(dx), s2[r], lay), acc1[r]);
        }
    }
}

/* Group g of the nr rows (prefetched ahead) against the tokens; the rows advance one group. */
static inline __attribute__((always_inline)) void
mx_few_step(const uint8_t **row, const uint8_t *const *x, int64_t ng, int64_t g,
            __m512 (*acc2)[MX_FEW / 2], __m256 *acc1, const int nt, const int nr, const int lay) {
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) kn__x86_prefetch(row[r], mx_lay_group_bytes(lay));
    mx_few_group(row, x, ng, g, acc2, acc1, nt, nr, lay, 8);
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) row[r] += mx_lay_group_bytes(lay);
}

/* One pass over nr rows: out[r][t] = row r . token t for r < nr, t < nt (inlined per nr, nt and
 * layout, so the loops unroll to constants). A packed row's tail group is as stored; it reads its
 * window in place when that lies before `end`: blocks past the row meet zero activations (isum 0)
 * and d_x = 0 (scale 0, or a subnormal-free 0 * 2^k; Q8_0's d_w there is masked to 0). */
static inline __attribute__((always_inline)) void
mx_few_pass(const uint8_t *const *rows, const uint8_t *const *x, int64_t nb, const uint8_t *end,
            float (*out)[MX_FEW], const int nt, const int nr, const int lay) {
    const int64_t ng = (nb + 7) / 8, full = nb / 8;
    const int tail_lay = lay == MX_LAY_Q8_0 ? MX_LAY_Q8_0 : MX_LAY_MXFP4;
    __m512 acc2[MX_FEW_R][MX_FEW / 2];
    __m256 acc1[MX_FEW_R];
    const uint8_t *row[MX_FEW_R];
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) {
        row[r] = rows[r];
        acc1[r] = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int p = 0; p < (nt + 1) / 2; p++) acc2[r][p] = _mm512_setzero_ps();
    }
    /* Two rows: two groups per iteration, so the second group's loads and decode are under way
     * while the first one's dot products run. (The odd last row alone: no unrolling.) */
    if (nr > 1) {
#pragma GCC unroll 2
        for (int64_t g = 0; g < full; g++) mx_few_step(row, x, ng, g, acc2, acc1, nt, nr, lay);
    } else {
        for (int64_t g = 0; g < full; g++) mx_few_step(row, x, ng, g, acc2, acc1, nt, nr, lay);
    }
    if (MX_PAIR_STEP(nr, nt, lay)) { /* the pair's lanes back to each row's, for the tail */
        acc1[0] = _mm512_castps512_ps256(acc2[0][0]);
        acc1[1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc2[0][0]), 1));
    }
    const int live = (int)(nb - 8 * full);
    const int tail_bytes = live * (lay == MX_LAY_Q8_0 ? KN__Q8_0_BYTES : KN__MXFP4_BYTES);
    for (int r = 0; r < nr && full < ng; r++) {
        /* The tail's bytes are prefetched ahead as a full group's are: the steps' prefetches
         * reach less than a line past each group, so without these a row of Q8_0 at K = 2880
         * (a 68-byte tail) leaves a line in about one row of three to a demand miss, and the
         * loop waits for memory there. */
        kn__x86_prefetch(row[r], tail_bytes);
        if (end - row[r] >= mx_lay_group_bytes(lay)) {
            mx_few_group(&row[r], x, ng, full, &acc2[r], &acc1[r], nt, 1, tail_lay, live);
        } else {
            _Alignas(64) uint8_t pad[8 * KN__Q8_0_BYTES] = {0}; /* >= MXFP4's 136 + 56 */
            const uint8_t *p = pad;
            memcpy(pad, row[r],
                   (size_t)live * (lay == MX_LAY_Q8_0 ? KN__Q8_0_BYTES : KN__MXFP4_BYTES));
            mx_few_group(&p, x, ng, full, &acc2[r], &acc1[r], nt, 1, tail_lay, live);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) {
#pragma GCC unroll 4
        for (int p = 0; p < nt / 2; p++) {
            out[r][2 * p] = kn__x86_tree8(_mm512_castps512_ps256(acc2[r][p]));
            out[r][2 * p + 1] = kn__x86_tree8(
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc2[r][p]), 1)));
        }
        if (nt & 1) out[r][nt - 1] = kn__x86_tree8(acc1[r]);
    }
}

/* mx_few_rows<n> (stored MXFP4 rows), mx_few_rowsp<n> (a packed copy's: W is its view) and
 * q8_few_rows<n> (stored Q8_0 rows). */
#define MX_FEW_ROWS_AS(name, n, lay)                                                               \
    static void name(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0,  \
                     int64_t n1) {                                                                 \
        const uint8_t *end = kn__x86_mat_end(W);                                                   \
        const int64_t nb = W->cols / KN__QK32;                                                     \
        const uint8_t *data = W->data;                                                             \
        int64_t r = n0;                                                                            \
        for (; MX_FEW_NR(n, lay) > 1 && r + MX_FEW_R <= n1; r += MX_FEW_R) {                       \
            const uint8_t *rows[MX_FEW_R];                                                         \
            float out[MX_FEW_R][MX_FEW];                                                           \
            for (int i = 0; i < MX_FEW_R; i++) rows[i] = data + (size_t)(r + i) * W->row_bytes;    \
            mx_few_pass(rows, x, nb, end, out, n, MX_FEW_R, lay);                                  \
            for (int i = 0; i < MX_FEW_R; i++)                                                     \
                for (int t = 0; t < n; t++) Y[t * ldy + r + i] = out[i][t];                        \
        }                                                                                          \
        for (; r < n1; r++) {                                                                      \
            const uint8_t *row = data + (size_t)r * W->row_bytes;                                  \
            float out[1][MX_FEW];                                                                  \
            mx_few_pass(&row, x, nb, end, out, n, 1, lay);                                         \
            for (int t = 0; t < n; t++) Y[t * ldy + r] = out[0][t];                                \
        }                                                                                          \
    }
#define MX_FEW_ROWS(n)                                                                             \
    MX_FEW_ROWS_AS(mx_few_rows##n, n, MX_LAY_MXFP4)                                                \
    MX_FEW_ROWS_AS(mx_few_rowsp##n, n, MX_LAY_MXFP4P)                                              \
    MX_FEW_ROWS_AS(q8_few_rows##n, n, MX_LAY_Q8_0)
MX_FEW_ROWS(1)
MX_FEW_ROWS(2)
MX_FEW_ROWS(3)
MX_FEW_ROWS(4)
MX_FEW_ROWS(5)
MX_FEW_ROWS(6)
MX_FEW_ROWS(7)
MX_FEW_ROWS(8)
#undef MX_FEW_ROWS
#undef MX_FEW_ROWS_AS

static const kn__x86_few_fn mx_few[MX_FEW + 1] = {NULL,         mx_few_rows1, mx_few_rows2,
                                                  mx_few_rows3, mx_few_rows4, mx_few_rows5,
                                                  mx_few_rows6, mx_few_rows7, mx_few_rows8};
static const kn__x86_few_fn mx_fewp[MX_FEW + 1] = {NULL,          mx_few_rowsp1, mx_few_rowsp2,
                                                   mx_few_rowsp3, mx_few_rowsp4, mx_few_rowsp5,
                                                   mx_few_rowsp6, mx_few_rowsp7, mx_few_rowsp8};
static const kn__x86_few_fn q8_few[MX_FEW + 1] = {NULL,         q8_few_rows1, q8_few_rows2,
                                                  q8_few_rows3, q8_few_rows4, q8_few_rows5,
                                                  q8_few_rows6, q8_few_rows7, q8_few_rows8};

/* ---- MXFP4 batches --------------------------------------------------------------------------- */

/* Rows are decoded once per tile into the interleaved layout of kn_simd_x86.h, two rows side by
 * side (mx_store_pair): a 512-bit vector holds vector k of one group of rows a and b, so lanes 0..7
 * are the block lanes of (row a, token) and 8..15 those of (row b, token), against a token's group
 * vector broadcast to both halves. vpdpbusd leaves each block's exact sum in its canonical lane
 * and the float step is one fma for both rows; a token needs no partner, and no load needs an
 * insert (a broadcast from memory is a load). Register tile: 3 row pairs x 4 tokens, enough
 * independent vpdpbusd chains to cover its latency (2 x 4 would leave it waiting).
 *
 * The next tile is decoded while this one is used, a group at a time between the register tile's
 * groups (mx_dec): the decode's shuffles then overlap the vpdpbusd instead of stalling them, and
 * its reads stream from memory at the compute's pace (the decoders prefetch ahead in the rows). */

#define MX_P 3 /* row pairs of a register tile: 3 x 4 tokens = 12 vpdpbusd chains (latency 5) */
#define MX_T 4 /* tokens of a register tile */

/* Group g of a stored row (k values) into half h of a pair: any group (mxfp4_dec_group,
 * q8_0_dec_group), or a full one (mxfp4_dec_full, q8_0_dec_full; ng groups per row). */
typedef void (*mx_dec_fn)(const uint8_t *row, int64_t k, const uint8_t *end, uint8_t *pair, int h,
                          int64_t g);
typedef void (*mx_dec_full_fn)(const uint8_t *row, int64_t ng, uint8_t *pair, int h, int64_t g);

/* A tile's rows to decode: the steps between register-tile groups hand out the full groups,
 * `per` (row, group) units at a time; mx_dec_rest decodes what they left and the tail groups.
 * The steps call nothing that is not inlined, so the accumulators stay in registers. */
typedef struct mx_dec {
    const uint8_t *src[8]; /* stored rows */
    uint8_t *dst[8];       /* their pairs (row r is half r % 2 of its pair) */
    int n, r;              /* rows; the next unit's row */
    int64_t g, full, ng;   /* the next unit's group; full groups and groups per row */
    int64_t per;           /* units per step */
    const char *pf;        /* lines to prefetch into L2 instead (a packed matrix's next pairs) */
    int64_t pf_left, pf_per;
} mx_dec;

static inline __attribute__((always_inline)) void mx_dec_step(mx_dec *d, mx_dec_full_fn dec) {
    for (int64_t i = 0; i < d->per && d->r < d->n; i++) {
        dec(d->src[d->r], d->ng, d->dst[d->r], d->r % 2, d->g);
        if (++d->g == d->full) d->g = 0, d->r++;
    }
    for (int64_t i = 0; i < d->pf_per && d->pf_left > 0; i++, d->pf_left--, d->pf += 64)
        _mm_prefetch(d->pf, _MM_HINT_T1);
}

static void mx_dec_rest(mx_dec *d, const kn_mat *W, mx_dec_fn dec) {
    const uint8_t *end = kn__x86_mat_end(W);
    for (; d->r < d->n; d->g = 0, d->r++)
        for (; d->g < d->full; d->g++)
            dec(d->src[d->r], W->cols, end, d->dst[d->r], d->r % 2, d->g);
    for (int r = 0; r < d->n; r++)
        for (int64_t g = d->full; g < d->ng; g++) dec(d->src[r], W->cols, end, d->dst[r], r % 2, g);
}

/* The pairs' layouts: MXFP4's (float scales, the tail group padded) and Q8_0's (q8p_*). */
enum { MX_TL_MXFP4, MX_TL_Q8 };

/* Group g of MX_P decoded row pairs (at wo in each) against nt prepared tokens, into acc; `tail`:
 * it is a Q8_0 pair's compact tail group (NULL: a full-layout group). */
static inline __attribute__((always_inline)) void
mx_tile_group(const uint8_t *const w[MX_P], const uint8_t *const x[MX_T], int64_t ng, int64_t g,
              size_t wo, __m512 acc[MX_P][MX_T], const int nt, const int tl, const q8p_tail *tail) {
    const size_t sc_off = (size_t)ng * KN__X86_GROUP_QS;           /* d_x of a token */
    const size_t xs_off = sc_off + (size_t)ng * 8 * sizeof(float); /* -bias * sum(q) of a token */
    const size_t xo = (size_t)g * KN__X86_GROUP_QS, so = (size_t)g * 32;
    __m512i s[MX_P][MX_T];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        const __m512i xs = mx_both(x[t] + xs_off + so);
#pragma GCC unroll 2
        for (int p = 0; p < MX_P; p++) s[p][t] = xs;
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        __m512i xv[MX_T], wv[MX_P];
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) xv[t] = mx_both(x[t] + xo + 32 * k);
#pragma GCC unroll 2
        for (int p = 0; p < MX_P; p++)
            wv[p] =
                tail ? q8p_tail_vec(w[p] + wo, k, tail) : _mm512_loadu_si512(w[p] + wo + 64 * k);
#pragma GCC unroll 2
        for (int p = 0; p < MX_P; p++)
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) s[p][t] = _mm512_dpbusd_epi32(s[p][t], wv[p], xv[t]);
    }
    __m512 ws[MX_P];
#pragma GCC unroll 2
    for (int p = 0; p < MX_P; p++)
        ws[p] = tail             ? q8p_tail_scales(w[p] + wo, tail)
                : tl == MX_TL_Q8 ? q8p_scales(w[p] + wo)
                                 : _mm512_loadu_ps(w[p] + wo + MX_PAIR_SC);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        const __m512 dx = _mm512_castsi512_ps(mx_both(x[t] + sc_off + so));
#pragma GCC unroll 2
        for (int p = 0; p < MX_P; p++)
            acc[p][t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[p][t]), _mm512_mul_ps(dx, ws[p]), acc[p][t]);
    }
}

/* MX_P decoded row pairs (layout tl, rows of nb blocks) against nt prepared tokens (1 .. MX_T):
 * out[2p + h][t] is row h of pair p against token t, in the canonical order; a step of `dc` after
 * each group. Inlined into one function per decoder and nt, so the loops are unrolled to
 * constants. */
static inline __attribute__((always_inline)) void
mx_tile(const uint8_t *const w[MX_P], const uint8_t *const x[MX_T], int64_t nb,
        float out[2 * MX_P][MX_T], mx_dec *dc, mx_dec_full_fn dec, const int nt, const int tl) {
    const int64_t ng = (nb + 7) / 8, full = tl == MX_TL_Q8 ? nb / 8 : ng;
    const size_t gb = tl == MX_TL_Q8 ? Q8P_GROUP : MX_PAIR_GROUP;
    __m512 acc[MX_P][MX_T];
    for (int p = 0; p < MX_P; p++)
        for (int t = 0; t < nt; t++) acc[p][t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < full; g++) {
        mx_tile_group(w, x, ng, g, (size_t)g * gb, acc, nt, tl, NULL);
        mx_dec_step(dc, dec);
    }
    if (full < ng) {
        const q8p_tail tail = q8p_tail_of((int)(nb - 8 * full));
        mx_tile_group(w, x, ng, full, (size_t)full * gb, acc, nt, tl, &tail);
        mx_dec_step(dc, dec);
    }
    for (int p = 0; p < MX_P; p++)
        for (int t = 0; t < nt; t++) {
            out[2 * p][t] = kn__x86_tree8(_mm512_castps512_ps256(acc[p][t]));
            out[2 * p + 1][t] = kn__x86_tree8(
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p][t]), 1)));
        }
}

typedef void (*mx_micro_fn)(const uint8_t *const[MX_P], const uint8_t *const[MX_T], int64_t,
                            float[2 * MX_P][MX_T], mx_dec *);

/* The register tiles of one decoder and layout, by tokens: mx_micro_<name>[nt]. */
#define MX_MICRO(name, dec, n, tl)                                                                 \
    static void mx_micro_##name##n(const uint8_t *const w[MX_P], const uint8_t *const x[MX_T],     \
                                   int64_t nb, float out[2 * MX_P][MX_T], mx_dec *dc) {            \
        mx_tile(w, x, nb, out, dc, dec, n, tl);                                                    \
    }
#define MX_MICROS(name, dec, tl)                                                                   \
    MX_MICRO(name, dec, 1, tl)                                                                     \
    MX_MICRO(name, dec, 2, tl)                                                                     \
    MX_MICRO(name, dec, 3, tl)                                                                     \
    MX_MICRO(name, dec, 4, tl)                                                                     \
    static const mx_micro_fn mx_micro_##name[MX_T + 1] = {                                         \
        NULL, mx_micro_##name##1, mx_micro_##name##2, mx_micro_##name##3, mx_micro_##name##4}

/* Rows of a decoded tile: a multiple of a register tile's rows that keeps two tiles (the one in
 * use and the next) within ~24 KiB of L1. */
static int mx_tile_rows(size_t row_bytes) {
    return kn__x86_tile_rows_by(2 * row_bytes, 2 * MX_P);
}

/* The rows [r0, r0 + rn) of W to decode into the pairs at `tile` (an odd last row also into its
 * pair's second half: a register tile's missing row repeats its pair's first; not stored). */
static mx_dec mx_dec_rows(const kn_mat *W, int64_t r0, int rn, uint8_t *tile, size_t pb) {
    mx_dec d = {.ng = kn__x86_groups(W->cols), .full = W->cols / KN__QK32 / 8};
    for (int r = 0; r < rn + rn % 2; r++) {
        d.src[r] = (const uint8_t *)W->data + (size_t)(r0 + (r < rn ? r : rn - 1)) * W->row_bytes;
        d.dst[r] = tile + (size_t)(r / 2) * pb;
    }
    d.n = rn + rn % 2;
    return d;
}

/* Rows n0 .. n1 of W (T > 1): dec writes a row's unsigned codes and weight scales group by group;
 * the tokens' prepared rows carry the matching bias per block. The scratch holds two tiles. */
static inline __attribute__((always_inline)) void
mx_rows_tiled(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0, int64_t n1,
              void *scratch, mx_dec_fn dec, const mx_micro_fn *micro, const int tl) {
    const int64_t ng = kn__x86_groups(W->cols), nb = W->cols / KN__QK32;
    const size_t pb = tl == MX_TL_Q8 ? q8p_pair_bytes(W->cols) : mx_pair_bytes(W->cols);
    const int R = mx_tile_rows(pb / 2);
    uint8_t *buf[2] = {scratch, (uint8_t *)scratch + pb * (size_t)(R / 2)};
    const int64_t tblocks = (x->T + MX_T - 1) / MX_T;
    int rn = n1 - n0 < R ? (int)(n1 - n0) : R;
    mx_dec d = mx_dec_rows(W, n0, rn, buf[0], pb);
    mx_dec_rest(&d, W, dec); /* the first tile at once */
    for (int64_t r0 = n0, cur = 0; r0 < n1; r0 += rn, cur ^= 1) {
        rn = n1 - r0 < R ? (int)(n1 - r0) : R;
        const int np = (rn + 1) / 2;
        const int64_t r1 = r0 + rn;
        const int rn1 = n1 - r1 < R ? (int)(n1 - r1) : R;
        /* the next tile, spread over this one's register-tile groups */
        d = mx_dec_rows(W, r1, rn1 > 0 ? rn1 : 0, buf[cur ^ 1], pb);
        const int64_t steps = tblocks * ((np + MX_P - 1) / MX_P) * ng;
        d.per = ((int64_t)d.n * d.full + steps - 1) / steps;
        for (int64_t t0 = 0; t0 < x->T; t0 += MX_T) {
            const int tn = x->T - t0 < MX_T ? (int)(x->T - t0) : MX_T;
            const uint8_t *xt[MX_T];
            for (int t = 0; t < MX_T; t++) /* missing tokens repeat the last; never read */
                xt[t] = (const uint8_t *)x->data + (size_t)(t0 + (t < tn ? t : tn - 1)) * x->stride;
            for (int p0 = 0; p0 < np; p0 += MX_P) {
                const uint8_t *w[MX_P];
                for (int i = 0; i < MX_P; i++) /* missing pairs repeat the first; not stored */
                    w[i] = buf[cur] + (size_t)(p0 + i < np ? p0 + i : p0) * pb;
                float out[2 * MX_P][MX_T];
                micro[tn](w, xt, nb, out, &d);
                for (int t = 0; t < tn; t++)
                    for (int i = 0; i < 2 * MX_P && 2 * p0 + i < rn; i++)
                        Y[(t0 + t) * ldy + r0 + 2 * p0 + i] = out[i][t];
            }
        }
        mx_dec_rest(&d, W, dec); /* what the steps left, and the tail groups */
    }
}

/* ---- MXFP4 rows ------------------------------------------------------------------------------ */

MX_MICROS(mxfp4, mxfp4_dec_full, MX_TL_MXFP4);
MX_MICROS(mxfp4p, mxfp4p_dec_full, MX_TL_MXFP4);

static const uint8_t *mxfp4_packed(const kn_mat *W);

static void rows_mxfp4(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                       int64_t n1, void *scratch) {
    const uint8_t *pk = mxfp4_packed(W);
    if (pk) { /* the same rows at the same offsets in the packed copy: a view of it */
        kn_mat P = *W;
        P.data = pk;
        P.packed = NULL;
        if (x->T <= MX_FEW_PASSES * MX_FEW)
            kn__x86_few_passes(&P, x, Y, ldy, n0, n1, mx_fewp, MX_FEW);
        else
            mx_rows_tiled(&P, x, Y, ldy, n0, n1, scratch, mxfp4p_dec_group, mx_micro_mxfp4p,
                          MX_TL_MXFP4);
        return;
    }
    if (x->T <= MX_FEW_PASSES * MX_FEW)
        kn__x86_few_passes(W, x, Y, ldy, n0, n1, mx_few, MX_FEW);
    else
        mx_rows_tiled(W, x, Y, ldy, n0, n1, scratch, mxfp4_dec_group, mx_micro_mxfp4, MX_TL_MXFP4);
}

/* A decoded tile's bytes (MXFP4 and Q8_0 decode to layouts of the same size). */
static size_t mx_tile_scratch(const kn_mat *W) {
    const size_t pb = mx_pair_bytes(W->cols);
    return 2 * (pb / 2) * (size_t)mx_tile_rows(pb / 2); /* two tiles */
}

static size_t scratch_mxfp4(const kn_mat *W, int64_t T) {
    /* the few-token path keeps nothing */
    return T > MX_FEW_PASSES * MX_FEW ? mx_tile_scratch(W) : 0;
}

/* ---- Q8_0 batches: the MXFP4 register tile with weights made unsigned ------------------------ */

/* vpdpbusd wants unsigned weights: the decoded int8 weights get +128 (a flip of the sign bit) and
 * the prepared tokens carry -128 * sum(q) per block in place of MXFP4's -12 * sum(q), so every
 * block's sum is still exact. The streaming kernel (T <= 8) reads the same prepared rows. */

/* The 8 fp16 d of a stored Q8_0 group, as stored. */
static inline __m128i q8_0_d16(const uint8_t *row) {
    return _mm_setr_epi16((short)kn__rd16(row), (short)kn__rd16(row + 34),
                          (short)kn__rd16(row + 68), (short)kn__rd16(row + 102),
                          (short)kn__rd16(row + 136), (short)kn__rd16(row + 170),
                          (short)kn__rd16(row + 204), (short)kn__rd16(row + 238));
}

/* A full group g (< k / 256) of a stored Q8_0 row as kn__x86_decode_q8_0 decodes it, weights made
 * unsigned, into half h of a pair (q8p layout): the steps of a batch tile take only these. */
static inline __attribute__((always_inline)) void q8_0_dec_full(const uint8_t *row, int64_t ng,
                                                                uint8_t *pair, int h, int64_t g) {
    (void)ng;
    const uint8_t *src = row + g * 8 * KN__Q8_0_BYTES;
    uint8_t *q = pair + g * Q8P_GROUP;
    __m512i u[4];
    kn__x86_prefetch(src, 8 * KN__Q8_0_BYTES);
    q8_0_codes_u8(src, u);
    mx_store_pair(q + 32 * h, u);
    _mm_storeu_si128((__m128i *)(q + Q8P_SC + 16 * h), q8_0_d16(src));
}

/* Any group; the tail group (left < 8 blocks) into the compact tail, only its blocks' codes and
 * scales stored. Its 8 blocks' window is read in place when it lies before `end`, else from a
 * zero-padded copy (at the matrix's end). */
static void q8_0_dec_group(const uint8_t *row, int64_t k, const uint8_t *end, uint8_t *pair, int h,
                           int64_t g) {
    const int64_t nb = k / KN__QK32, ng = kn__x86_groups(k);
    const int left = (int)(nb - 8 * g);
    if (left >= 8) {
        q8_0_dec_full(row, ng, pair, h, g);
        return;
    }
    const uint8_t *src = row + g * 8 * KN__Q8_0_BYTES;
    _Alignas(64) uint8_t pad[8 * KN__Q8_0_BYTES];
    if (end - src < 8 * KN__Q8_0_BYTES) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, src, (size_t)left * KN__Q8_0_BYTES);
        src = pad;
    }
    __m512i u[4];
    q8_0_codes_u8(src, u);
    uint8_t *t0 = pair + g * Q8P_GROUP;
    const size_t vb = 8 * (size_t)left, hb = 4 * (size_t)left * (size_t)h;
    const __mmask32 m = (__mmask32)((1ull << (4 * left)) - 1);
    for (int i = 0; i < 4; i++) { /* u[i] = [vector 2i | vector 2i + 1] */
        _mm256_mask_storeu_epi8(t0 + 2 * i * vb + hb, m, _mm512_castsi512_si256(u[i]));
        _mm256_mask_storeu_epi8(t0 + (2 * i + 1) * vb + hb, m, _mm512_extracti64x4_epi64(u[i], 1));
    }
    _mm_mask_storeu_epi16(t0 + 8 * vb + 2 * (size_t)left * (size_t)h, (__mmask8)((1u << left) - 1),
                          q8_0_d16(src));
}

static void q8_0_act_prep(const float *x, void *dst, int64_t k) {
    kn__x86_prep_q8_0p(x, dst, k);
    const int64_t ng = kn__x86_groups(k);
    int32_t *xs = (int32_t *)((uint8_t *)dst + ng * KN__X86_GROUP_QS + ng * 8 * sizeof(float));
    for (int64_t b = 0; b < ng * 8; b++) /* -12 * sum(q) -> -128 * sum(q), exactly */
        xs[b] = xs[b] / KN__X86_MXFP4_BIAS * 128;
}

MX_MICROS(q8_0, q8_0_dec_full, MX_TL_Q8);

/* ---- Q8_0 packed: every row decoded once into the pairs' layout ------------------------------ */

/* A dense matrix is multiplied by the same decode batch's rows at every step, so decoding its tile
 * at every call is work done again and again, and at a decode batch's size the decode is as
 * much work as the vpdpbusd themselves. kn_pack keeps the decoded pairs of all rows (q8p layout,
 * after a header naming the matrix they belong to; an odd last row fills its pair twice): as large
 * as the stored rows, and read at every T in their place (kn_pack_replaces). */

#define Q8P_PACK_MAGIC 0x34584b5030513858ull /* "X8Q0PKX4" */

static size_t q8_0_pack_bytes(const kn_mat *W) {
    return sizeof(kn__pack_hdr) + (size_t)((W->rows + 1) / 2) * q8p_pair_bytes(W->cols);
}

static void q8_0_pack(const kn_mat *W, void *dst) {
    uint8_t *pairs = kn__pack_start(W, dst, Q8P_PACK_MAGIC);
    const size_t pb = q8p_pair_bytes(W->cols);
    const int64_t ng = kn__x86_groups(W->cols);
    const uint8_t *end = kn__x86_mat_end(W);
    for (int64_t r = 0; r < W->rows + W->rows % 2; r++) { /* an odd last row fills its pair */
        const uint8_t *row =
            (const uint8_t *)W->data + (size_t)(r < W->rows ? r : W->rows - 1) * W->row_bytes;
        for (int64_t g = 0; g < ng; g++)
            q8_0_dec_group(row, W->cols, end, pairs + (size_t)(r / 2) * pb, (int)(r % 2), g);
    }
}

/* W's packed pairs, when W->packed was made from this very matrix. */
static const uint8_t *q8_0_packed(const kn_mat *W) {
    return kn__packed_data(W, Q8P_PACK_MAGIC);
}

/* ---- MXFP4 packed: the stored rows with every full group in decode order --------------------- */

/* The byte gathers of mxfp4_codes_e are a large part of a group's decode, paid at every call.
 * The packed copy stores each full group as the gathers leave it (za, zb, then the 8 exponents,
 * each less 128 so that a sign extension is their whole decode: 136 bytes, as stored) and the tail
 * group as stored: the same size, row stride and offsets as the matrix, so the kernels read it at
 * every T in place of the stored rows (kn_pack_replaces), and the reads past a row's end meet the
 * same kind of bytes. */

#define MX4_PACK_MAGIC 0x3234504b34584d58ull /* "XMX4KP42" */

static size_t mxfp4_pack_bytes(const kn_mat *W) {
    return sizeof(kn__pack_hdr) + (size_t)W->rows * W->row_bytes;
}

/* A full group: the decode's gathers, done once: za from the group's start, zb from 8 bytes on
 * (every load stays within the group's 136 bytes); the exponents follow as e - 128 (int8). */
static void mxfp4_pack_group(const uint8_t *in, uint8_t *out, const void *ctx) {
    (void)ctx;
    const __m512i qidx = _mm512_loadu_si512(mxfp4_qs_idx);
    _mm512_storeu_si512(
        out, _mm512_permutex2var_epi8(_mm512_loadu_si512(in), qidx, _mm512_loadu_si512(in + 64)));
    _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi8(_mm512_loadu_si512(in + 8), qidx,
                                                           _mm512_loadu_si512(in + 72)));
    for (int j = 0; j < 8; j++) out[MX_GROUP_E + j] = (uint8_t)(in[j * KN__MXFP4_BYTES] ^ 0x80);
}

static void mxfp4_pack(const kn_mat *W, void *dst) { /* the tail group as stored */
    kn__pack_groups(W, dst, MX4_PACK_MAGIC, KN__MXFP4_BYTES, mxfp4_pack_group, NULL, NULL);
}

static const uint8_t *mxfp4_packed(const kn_mat *W) {
    return kn__packed_data(W, MX4_PACK_MAGIC);
}

/* Rows n0 .. n1 from packed pairs: pair q holds rows 2q and 2q + 1; the pairs the range touches are
 * computed whole and only its rows are stored. While a block of MX_P pairs meets the tokens, the
 * next block is prefetched into L2 a few lines per group. */
static void mx_rows_packed(const kn_mat *W, const uint8_t *pairs, const kn__act *x, float *Y,
                           int64_t ldy, int64_t n0, int64_t n1) {
    const int64_t ng = kn__x86_groups(W->cols), nb = W->cols / KN__QK32, q1 = (n1 + 1) / 2;
    const size_t pb = q8p_pair_bytes(W->cols);
    const int64_t steps = (x->T + MX_T - 1) / MX_T * ng;
    for (int64_t b0 = n0 / 2; b0 < q1; b0 += MX_P) {
        const int np = q1 - b0 < MX_P ? (int)(q1 - b0) : MX_P;
        const int64_t nn = q1 - (b0 + np) < MX_P ? q1 - (b0 + np) : MX_P; /* next block's pairs */
        mx_dec d = {.pf = (const char *)pairs + (size_t)(b0 + np) * pb,
                    .pf_left = (int64_t)((size_t)nn * pb / 64)};
        d.pf_per = (d.pf_left + steps - 1) / steps;
        for (int64_t t0 = 0; t0 < x->T; t0 += MX_T) {
            const int tn = x->T - t0 < MX_T ? (int)(x->T - t0) : MX_T;
            const uint8_t *xt[MX_T];
            for (int t = 0; t < MX_T; t++) /* missing tokens repeat the last; never read */
                xt[t] = (const uint8_t *)x->data + (size_t)(t0 + (t < tn ? t : tn - 1)) * x->stride;
            const uint8_t *w[MX_P];
            for (int i = 0; i < MX_P; i++) /* missing pairs repeat the first; not stored */
                w[i] = pairs + (size_t)(b0 + (i < np ? i : 0)) * pb;
            float out[2 * MX_P][MX_T];
            mx_micro_q8_0[tn](w, xt, nb, out, &d);
            for (int i = 0; i < 2 * np; i++) {
                const int64_t r = 2 * b0 + i;
                if (r < n0 || r >= n1) continue;
                for (int t = 0; t < tn; t++) Y[(t0 + t) * ldy + r] = out[i][t];
            }
        }
    }
}

/* Group g of a pair at w (a compact tail: `tail`, else NULL) against nt tokens: its 8 vectors
 * loaded once and applied to every token (the token's group vector broadcast to both halves, so
 * the block sums land in their canonical lanes: row a's in 0-7, b's in 8-15). */
static inline __attribute__((always_inline)) void
q8p_stream_group(const uint8_t *w, const uint8_t *const *x, int64_t ng, int64_t g, __m512 *acc,
                 const int nt, const q8p_tail *tail) {
    const size_t sc_off = (size_t)ng * KN__X86_GROUP_QS, xs_off = sc_off + (size_t)ng * 32;
    __m512i s[MX_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) s[t] = mx_both(x[t] + xs_off + 32 * g);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m512i wk = tail ? q8p_tail_vec(w, k, tail) : _mm512_loadu_si512(w + 64 * k);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            s[t] = _mm512_dpbusd_epi32(s[t], wk,
                                       mx_both(x[t] + (size_t)g * KN__X86_GROUP_QS + 32 * k));
    }
    const __m512 ws = tail ? q8p_tail_scales(w, tail) : q8p_scales(w);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m512 dx = _mm512_castsi512_ps(mx_both(x[t] + sc_off + 32 * g));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dx, ws), acc[t]);
    }
}

/* Rows n0 .. n1 of a packed W against nt tokens, streaming the pairs once: per group and pair 8
 * loads and 8 vpdpbusd a token, the block sums already in their canonical lanes, a quarter of the
 * stored rows' instructions at one token; the pairs the range touches are computed whole and only
 * its rows stored. No software prefetch: with this few instructions a byte the hardware
 * prefetchers keep up. (Against 2-6 tokens the stored rows' passes read faster: each token's
 * broadcast group vectors, one load per vpdpbusd, bound it.) */
static inline __attribute__((always_inline)) void q8p_stream(const kn_mat *W,
                                                             const uint8_t *const *x, float *Y,
                                                             int64_t ldy, int64_t n0, int64_t n1,
                                                             const int nt) {
    const uint8_t *pairs = q8_0_packed(W);
    const int64_t nb = W->cols / KN__QK32, ng = kn__x86_groups(W->cols), full = nb / 8;
    const size_t pb = q8p_pair_bytes(W->cols);
    const q8p_tail tail = q8p_tail_of((int)(nb - 8 * full));
    for (int64_t q = n0 / 2; q < (n1 + 1) / 2; q++) {
        const uint8_t *w = pairs + (size_t)q * pb;
        __m512 acc[MX_FEW];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
        for (int64_t g = 0; g < full; g++, w += Q8P_GROUP)
            q8p_stream_group(w, x, ng, g, acc, nt, NULL);
        if (full < ng) q8p_stream_group(w, x, ng, full, acc, nt, &tail);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            if (2 * q >= n0) Y[t * ldy + 2 * q] = kn__x86_tree8(_mm512_castps512_ps256(acc[t]));
            if (2 * q + 1 < n1)
                Y[t * ldy + 2 * q + 1] = kn__x86_tree8(
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t]), 1)));
        }
    }
}

/* Tokens from which a batch reads a packed matrix's pairs with the tile: below, the stored rows'
 * streaming passes read faster (bench_kernels, alternated; also than streaming the pairs against
 * 2-6 tokens, one to three pairs a step, with or without prefetching them into L2). */
#define MX_Q8P_FROM 7

/* Up to 8 tokens stream the stored rows as MXFP4 does (each group decoded in registers once and
 * applied to every token); a packed matrix's pairs are read instead by the batches' tile from
 * MX_Q8P_FROM tokens, and by one token's stream where the row has no tail group (there the pairs
 * stream faster; with a tail group, as large as the stored rows, no faster). Batches of a matrix
 * without them decode the tile (measured faster at 16 tokens than two streaming passes). */
static void rows_q8_0(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    const uint8_t *pairs = q8_0_packed(W);
    if (pairs && x->T == 1 && W->cols % (8 * KN__QK32) == 0) {
        const uint8_t *x0 = x->data;
        q8p_stream(W, &x0, Y, ldy, n0, n1, 1);
    } else if (pairs && x->T >= MX_Q8P_FROM) {
        mx_rows_packed(W, pairs, x, Y, ldy, n0, n1);
    } else if (x->T <= MX_FEW) {
        kn__x86_few_passes(W, x, Y, ldy, n0, n1, q8_few, MX_FEW);
    } else {
        mx_rows_tiled(W, x, Y, ldy, n0, n1, scratch, q8_0_dec_group, mx_micro_q8_0, MX_TL_Q8);
    }
}

static size_t scratch_q8_0(const kn_mat *W, int64_t T) {
    const size_t pb = q8p_pair_bytes(W->cols);
    return T > MX_FEW ? 2 * (pb / 2) * (size_t)mx_tile_rows(pb / 2) : 0; /* two tiles */
}

const kn__kernel kn__avx512_mxfp4 = {"avx512-mxfp4-q8_0p", kn__x86_q8_0p_bytes, kn__x86_prep_q8_0p,
                                     scratch_mxfp4, rows_mxfp4};

const kn__kernel kn__avx512_q8_0 = {"avx512-q8_0-q8_0p", kn__x86_q8_0p_bytes, q8_0_act_prep,
                                    scratch_q8_0, rows_q8_0};

const kn__packer kn__avx512_pack_q8_0 = {q8_0_pack_bytes, q8_0_pack, false};
const kn__packer kn__avx512_pack_mxfp4 = {mxfp4_pack_bytes, mxfp4_pack, true};
