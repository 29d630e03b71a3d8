/* kernels/kn_simd_x86.h — internal: what the x86 kernel files (kn_simd_avx2.c, kn_simd_avxvnni.c,
 * kn_simd_avx512.c) share: the layouts of prepared activations and decoded weight tiles, the
 * decoders and preparers (defined once, in kn_simd_avx2.c), and inline helpers for the canonical
 * reductions. Include only from files compiled with AVX2 (*_avx2.c, *_avxvnni.c, *_avx512.c).
 *
 * Q8_0 activations in "interleaved" layout: the 8 blocks b = 8g .. 8g+7 of group g occupy 256
 * bytes as 8 vectors X_k (k = 0..7) whose 32-bit lane j holds elements 4k .. 4k+3 of block 8g+j.
 * Weights are decoded the same way, so one vpdpbusd per k adds 4 products of every block into
 * that block's own lane: after 8 of them lane j is block 8g+j's exact integer sum, already in
 * the canonical lane b % 8, with no horizontal reduction. Per group follow 8 float scales d_x and
 * 8 int32 sums -12 * sum(q) (MXFP4 codes are stored biased by +12 to make them unsigned). Blocks
 * past the row's end are zero with zero scale, and leave every lane unchanged. */
#ifndef KN_SIMD_X86_H
#define KN_SIMD_X86_H

#include "kernels/kn_internal.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

/* Bit `bit` of register `reg` (0 eax, 1 ebx, 2 ecx, 3 edx) of CPUID leaf/subleaf: for features
 * __builtin_cpu_supports does not name in every compiler (clang 14 knows neither "f16c" nor
 * "avxvnni"). Only meaningful once the AVX state is known to be enabled (the avx2 check). */
static inline bool kn__x86_cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit) {
    unsigned r[4] = {0, 0, 0, 0};
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return (r[reg] >> bit) & 1u;
}

#define KN__X86_GROUP_QS   256 /* bytes of qs per group of 8 blocks */
#define KN__X86_MXFP4_BIAS 12

/* Prepared Q8_0 row of k values: qs[ng][256], then float dx[ng * 8], then int32 -12 * sum(q)
 * [ng * 8]. */
static inline int64_t kn__x86_groups(int64_t k) {
    return (k / KN__QK32 + 7) / 8;
}
size_t kn__x86_q8_0p_bytes(int64_t k);
void kn__x86_prep_q8_0p(const float *x, void *dst, int64_t k);
/* The same, then the q again in natural order at kn__x86_q8_0p_bytes(k) (ng * 256 bytes): one
 * token's Q8_0 rows load each stored block's 32 weights as they lie. */
size_t kn__x86_q8_0n_bytes(int64_t k);
void kn__x86_prep_q8_0n(const float *x, void *dst, int64_t k);
/* The same as kn__x86_prep_q8_0p, then per group 320 bytes for one token's MXFP4 rows
 * (kn__xs_q8_0m_grp in kn_simd_x86_stream.h): for the block sets h = 0, 1, 4 vectors of 8-byte
 * runs, vector k of set h holding elements 8r .. 8r + 7 (r = 0, 2, 1, 3 for k = 0..3) of blocks 4h,
 * 4h + 2 (low half) and 4h + 1, 4h + 3 (high half); then the 8 d_x and the 8 -12 * sum(q) in the
 * lane order kn__x86_pair_lanes. */
size_t kn__x86_q8_0m_bytes(int64_t k);
void kn__x86_prep_q8_0m(const float *x, void *dst, int64_t k);
#define KN__X86_Q8_0M_GROUP 320
/* Lane i of a pair-ordered vector holds block kn__x86_pair_lanes[i] of its group: blocks 0, 2, 4,
 * 6 in the low 128-bit half, 1, 3, 5, 7 in the high one (the order the one-token MXFP4 kernel's
 * block sums and exponents come in). */
static const int kn__x86_pair_lanes[8] = {0, 2, 4, 6, 1, 3, 5, 7};
/* Q8_K rows in ggml's layout (kn__block_q8_K). Inline: the streaming kernels find a token's
 * parts from it once per row. */
static inline size_t kn__x86_q8_K_bytes(int64_t k) {
    return (size_t)(k / KN__QK_K) * KN__Q8_K_BYTES;
}
void kn__x86_prep_q8_K(const float *x, void *dst, int64_t k);
/* Q8_K rows for the Q6_K kernels: the kn__block_q8_K blocks, then (at kn__x86_q8_Ki_qs) each
 * block's 256 q group-interleaved like the decoded Q6_K codes. */
size_t kn__x86_q8_Ki_bytes(int64_t k);
void kn__x86_prep_q8_Ki(const float *x, void *dst, int64_t k);
static inline size_t kn__x86_q8_Ki_qs(int64_t k) {
    return kn__align64((size_t)(k / KN__QK_K) * KN__Q8_K_BYTES);
}
/* Q8_K rows for the AVX2 / AVX-VNNI Q4_K kernels: the kn__block_q8_K blocks (the batch tiles read
 * them), then at kn__x86_q8_Ki_qs per block its 256 q and 16 bsums again, 32-byte aligned
 * (KN__X86_Q8_KN_BLOCK bytes: the blocks' 292-byte stride left half the loads across cache
 * lines), then at kn__x86_q8_Kn_dx the blocks' d, zero-padded to a multiple of 8 (a chunk's 8 in
 * one load), then at kn__x86_q8_Kn_qp per block (KN__X86_Q8_KN_BLOCK bytes) its q in the order of
 * the packed Q4_K copy's codes (kn__x86_q4kp_order: per 64 values, the words of groups 2j and
 * 2j + 1 alternating) and the 8 group sums of q the mins multiply, bsums[2g] + bsums[2g + 1]
 * (|sum| <= 4096: int16), zero-padded. */
#define KN__X86_Q8_KN_BLOCK (KN__QK_K + KN__QK_K / 16 * 2)
size_t kn__x86_q8_Kn_bytes(int64_t k);
void kn__x86_prep_q8_Kn(const float *x, void *dst, int64_t k);
static inline size_t kn__x86_q8_Kn_dx(int64_t k) {
    return kn__x86_q8_Ki_qs(k) + (size_t)(k / KN__QK_K) * KN__X86_Q8_KN_BLOCK;
}
static inline size_t kn__x86_q8_Kn_qp(int64_t k) {
    return kn__x86_q8_Kn_dx(k) + (size_t)(k / KN__QK_K + 7) / 8 * 8 * sizeof(float);
}

/* Decoded weight tiles, per row:
 *  MXFP4: u8 codes (kvalue + 12) interleaved [ng][256], then float h(e) [ng * 8].
 *  Q8_0:  int8 weights interleaved [ng][256], then float d_w [ng * 8].
 *  Q6_K:  per super-block a kn__x86_q6k (codes 0..63 group-interleaved, and the scales).
 *  Q4_K:  per super-block a kn__x86_q4k. */
typedef struct kn__x86_q6k {
    uint8_t codes[256]; /* codes 0..63, group-interleaved (kn__x86_q6k_interleave) */
    int16_t sg[16];     /* word p: the scale of the group that word p of every vector holds */
    int16_t scm32[16];  /* the 16 scales times -32, against the activation's bsums */
    float d;
    float pad[7];
} kn__x86_q6k;

typedef struct kn__x86_q4k {
    uint8_t codes[256];  /* 0..15, natural order */
    int16_t sc16[8][16]; /* per 32-chunk (one group): its scale in every lane */
    int16_t m16[16];     /* lane i: the min of group i / 2 (bsums cover 16 values) */
    float d, dmin;
    float pad[6];
} kn__x86_q4k;

size_t kn__x86_mxfp4_row_bytes(int64_t k);
void kn__x86_decode_mxfp4(const uint8_t *row, int64_t k, void *dst);
size_t kn__x86_q8_0_row_bytes(int64_t k);
void kn__x86_decode_q8_0(const uint8_t *row, int64_t k, void *dst);
void kn__x86_decode_q6_K(const uint8_t *row, int64_t k, kn__x86_q6k *dst);
void kn__x86_decode_q4_K(const uint8_t *row, int64_t k, kn__x86_q4k *dst);

/* Software prefetch distances of the streaming kernels, in bytes ahead of the weight being read:
 * far ahead into L2 (the memory latency, with room for a loaded machine's longer one), and a
 * little ahead into L1 (the L2 latency). The hardware prefetchers alone leave the decode and the
 * memory latency serialized. Each can be set with -D to sweep it (0: no prefetch at that level),
 * as can the bytes between prefetches (KN__X86_PREFETCH_STEP) and the far prefetch's hint. */
#ifndef KN__X86_PREFETCH_L2
#define KN__X86_PREFETCH_L2 16384
#endif
#ifndef KN__X86_PREFETCH_L1
#define KN__X86_PREFETCH_L1 512
#endif
#ifndef KN__X86_PREFETCH_STEP
#define KN__X86_PREFETCH_STEP 64
#endif
#ifndef KN__X86_PREFETCH_HINT_L2
#define KN__X86_PREFETCH_HINT_L2 _MM_HINT_T1
#endif
/* Prefetches what a stream reading [p, p + n) now will read later: one line per step at each
 * distance, which covers every line when successive calls advance by n (with a 128-byte step, the
 * L2's adjacent-line prefetcher fetches the other line of each pair). The loop has constant
 * bounds and offsets and is unrolled whatever the body around it (GCC leaves it rolled in large
 * flattened bodies; its vectorizer would drop the prefetches). */
static inline __attribute__((always_inline)) void kn__x86_prefetch(const uint8_t *p, const int n) {
#pragma GCC unroll 8
    for (int o = 0; o < n; o += KN__X86_PREFETCH_STEP) {
        if (KN__X86_PREFETCH_L2)
            _mm_prefetch((const char *)p + KN__X86_PREFETCH_L2 + o, KN__X86_PREFETCH_HINT_L2);
        if (KN__X86_PREFETCH_L1)
            _mm_prefetch((const char *)p + KN__X86_PREFETCH_L1 + o, _MM_HINT_T0);
    }
}

/* The far prefetches alone, for a stream whose loop keeps ahead of L2 without the near ones (the
 * packed Q4_K copy: 1-2 % faster without them, docs/kernels.md). */
static inline __attribute__((always_inline)) void kn__x86_prefetch_far(const uint8_t *p,
                                                                       const int n) {
#pragma GCC unroll 8
    for (int o = 0; o < n; o += KN__X86_PREFETCH_STEP)
        if (KN__X86_PREFETCH_L2)
            _mm_prefetch((const char *)p + KN__X86_PREFETCH_L2 + o, KN__X86_PREFETCH_HINT_L2);
}

/* Batches decode a tile of rows, then spend a while on the tokens without touching memory, so the
 * hardware prefetchers fall idle and the next tile's decode would wait for DRAM. The token loop
 * therefore prefetches the next tile (rows [r1, r2) of W) into L2, one slice per iteration:
 * slice `part` of `parts`. */
static inline void kn__x86_prefetch_rows(const kn_mat *W, int64_t r1, int64_t r2, int64_t part,
                                         int64_t parts) {
    if (r1 >= r2 || part >= parts) return;
    const uint8_t *p = (const uint8_t *)W->data + (size_t)r1 * W->row_bytes;
    const size_t lines = ((size_t)(r2 - r1) * W->row_bytes + 63) / 64;
    const size_t a = lines * (size_t)part / (size_t)parts,
                 b = lines * (size_t)(part + 1) / (size_t)parts;
    for (size_t l = a; l < b; l++) _mm_prefetch((const char *)p + 64 * l, _MM_HINT_T1);
}

/* The same, spread out: a cursor over the lines of rows [r1, r2) of W that hands out `per` lines
 * at each of `slots` steps, so a tile's compute prefetches the next tile a little at a time and
 * the prefetches never crowd out the compute's own loads (line fill buffers are few). */
typedef struct kn__x86_pf {
    const char *p;
    int64_t left; /* lines */
    int64_t per;  /* lines per step */
} kn__x86_pf;

static inline kn__x86_pf kn__x86_pf_rows(const kn_mat *W, int64_t r1, int64_t r2, int64_t slots) {
    kn__x86_pf pf = {(const char *)W->data + (size_t)r1 * W->row_bytes, 0, 0};
    if (r1 >= r2 || slots <= 0) return pf;
    pf.left = ((r2 - r1) * (int64_t)W->row_bytes + 63) / 64;
    pf.per = (pf.left + slots - 1) / slots;
    return pf;
}

static inline __attribute__((always_inline)) void kn__x86_pf_step(kn__x86_pf *pf) {
    for (int64_t i = 0; i < pf->per && pf->left > 0; i++, pf->left--, pf->p += 64)
        _mm_prefetch(pf->p, _MM_HINT_T1);
}

/* Rows of a tile: as many as keep the decoded tile within ~24 KiB of L1 (1..8). */
static inline int kn__x86_tile_rows(size_t row_bytes) {
    size_t r = (24 * 1024) / (row_bytes ? row_bytes : 1);
    return r < 1 ? 1 : r > 8 ? 8 : (int)r;
}

/* The same rounded down to a multiple of m, the rows of a register tile (at least m): a partial
 * register tile would repeat a row and throw its results away. */
static inline int kn__x86_tile_rows_by(size_t row_bytes, int m) {
    const int r = kn__x86_tile_rows(row_bytes) / m * m;
    return r > 0 ? r : m;
}

/* The interleaving transpose: r[i] = [block i | block i + 4] as 4 dwords per 128-bit half;
 * returns v[k] = dword k of blocks 0..3 (low half) and 4..7 (high half), k = 0..3. */
static inline void kn__x86_transpose4(const __m256i r[4], __m256i v[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    v[0] = _mm256_unpacklo_epi64(t0, t2);
    v[1] = _mm256_unpackhi_epi64(t0, t2);
    v[2] = _mm256_unpacklo_epi64(t1, t3);
    v[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* The nibble bytes of one full group of 8 stored MXFP4 blocks (136 bytes) interleaved: v[k] holds
 * dword k of each block's 16 qs bytes (block j in lane j). */
static inline void kn__x86_mxfp4_gather(const uint8_t *row, __m256i v[4]) {
    __m256i r[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        r[i] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(row + 17 * i + 1))),
            _mm_loadu_si128((const __m128i *)(row + 17 * (i + 4) + 1)), 1);
    kn__x86_transpose4(r, v);
}

/* Interleaved nibble bytes (kn__x86_mxfp4_gather's v) to biased codes: w[k] and w[k + 4] hold the
 * low and high nibbles of dword k of each block (elements 4k.. and 16+4k..). */
static inline void kn__x86_mxfp4_nibbles(const __m256i v[4], __m256i w[8]) {
    const __m256i tbl = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        w[k] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(v[k], m4));
        w[k + 4] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(v[k], 4), m4));
    }
}

/* One full group of 8 stored MXFP4 blocks (136 bytes) to interleaved biased codes. */
static inline void kn__x86_mxfp4_group(const uint8_t *row, __m256i w[8]) {
    __m256i v[4];
    kn__x86_mxfp4_gather(row, v);
    kn__x86_mxfp4_nibbles(v, w);
}

/* h(e) of the 8 blocks of a group, as a vector (table lookups; the compiler assembles them). */
static inline __m256 kn__x86_mxfp4_h(const uint8_t *row) {
    _Alignas(32) uint32_t hb[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) hb[j] = kn__e8m0_half_bits[row[17 * j]];
    return _mm256_load_ps((const float *)hb);
}

/* h(e) = 2^(e - 128) as float bits from e << 23 per lane (e 0..255), kn__e8m0_half_bits' values
 * with integer arithmetic: (e - 1) << 23 for e >= 2, else 2^-128 << e = (e << 21) + 2^-128, the
 * larger of the two in every case. */
static inline __m256 kn__x86_e8m0_half8(__m256i e23) {
    return _mm256_castsi256_ps(
        _mm256_max_epi32(_mm256_sub_epi32(e23, _mm256_set1_epi32(1 << 23)),
                         _mm256_add_epi32(_mm256_srli_epi32(e23, 2), _mm256_set1_epi32(1 << 21))));
}

/* The AVX2 and AVX-VNNI rows' packed MXFP4 copy (kn_pack; kn_simd_avx2.c writes it), in the
 * matrix's own geometry (size, row stride, offsets) after a kn__pack_hdr: each full group of 8
 * blocks as the decode wants it, the 4 vectors of kn__x86_mxfp4_gather (128 bytes), then the 8
 * exponents in block order; a tail group of n < 8 blocks the same way in its 17n bytes: for k =
 * 0..3 dword k of its n blocks (4n bytes, so a load at 4nk has block j in lane j), then its n
 * exponents (at 16n). Its magic says how the exponents are kept: as stored (h(e) by
 * kn__x86_e8m0_half8), or, when every one of them is at least 2 (as in quantized weights: e < 2
 * scales a block by 2^-127 or less), as e - 1, whose h(e) bits are (e - 1) << 23 by one shift. */
#define KN__X86_MXFP4P_MAGIC 0x5032564134584d58ull /* "XMX4AV2P": exponents as stored */
#define KN__X86_MXFP4Q_MAGIC 0x5132564134584d58ull /* "XMX4AV2Q": exponents as e - 1 */
#define KN__X86_MXFP4P_E     128                   /* the exponents' offset in a packed group */

/* The biased codes (as kn__x86_mxfp4_group's) of a packed group whose 4 vectors lie `stride` bytes
 * apart (32 in a full group, 4n in a tail of n blocks, whose lanes from n on hold other bytes):
 * plain loads, no gathers. Each vector is loaded once (the empty asm): the compiler would load it
 * again as the mask's memory operand, and a group's loads cross cache lines often. */
static inline void kn__x86_mxfp4p_codes(const uint8_t *grp, int stride, __m256i w[8]) {
    __m256i v[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_si256((const __m256i *)(grp + stride * k));
        __asm__("" : "+x"(v[k]));
    }
    kn__x86_mxfp4_nibbles(v, w);
}
static inline void kn__x86_mxfp4p_group(const uint8_t *grp, __m256i w[8]) {
    kn__x86_mxfp4p_codes(grp, 32, w);
}
/* h(e) of the 8 exponent bytes at e (e1: kept as e - 1, KN__X86_MXFP4Q_MAGIC). */
static inline __m256 kn__x86_mxfp4p_h8(const uint8_t *e, const bool e1) {
    const __m256i e23 =
        _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e)), 23);
    return e1 ? _mm256_castsi256_ps(e23) : kn__x86_e8m0_half8(e23);
}
static inline __m256 kn__x86_mxfp4p_h(const uint8_t *grp, const bool e1) {
    return kn__x86_mxfp4p_h8(grp + KN__X86_MXFP4P_E, e1);
}

size_t kn__x86_mxfp4p_bytes(const kn_mat *W);
void kn__x86_mxfp4p_pack(const kn_mat *W, void *dst);
/* The packed copy's data when W->packed is one kn__x86_mxfp4p_pack made for W (*e1: with the
 * exponents as e - 1), else NULL. */
static inline const uint8_t *kn__x86_mxfp4p_data(const kn_mat *W, bool *e1) {
    const uint8_t *q = kn__packed_data(W, KN__X86_MXFP4Q_MAGIC);
    *e1 = q != NULL;
    return q ? q : kn__packed_data(W, KN__X86_MXFP4P_MAGIC);
}
/* The tile decoder's packed twins (kn__x86_decode_mxfp4): a packed row, its exponents as stored
 * (p) or as e - 1 (q). */
void kn__x86_decode_mxfp4p(const uint8_t *row, int64_t k, void *dst);
void kn__x86_decode_mxfp4q(const uint8_t *row, int64_t k, void *dst);

/* The AVX2 and AVX-VNNI rows' packed Q4_K copy (kn_pack; kn_simd_avx2.c writes it), in the
 * matrix's own geometry (size, row stride, offsets) after a kn__pack_hdr. A row's super-blocks go
 * in chunks of 8 (the last one of the row may hold fewer, n); a chunk of n keeps its 144n bytes,
 * arranged so that the kernels read each part with plain loads:
 *   at 0       the n d (fp16), at 2n the n dmin (one load and one conversion a chunk each);
 *   at 4n      8 bytes per super-block i: byte 8i + g holds the low 4 bits of group g's scale
 *              (low nibble) and of its min (high nibble);
 *   at 12n     4 bytes per super-block: byte b holds the high 2 bits of the scales of groups b
 *              and b + 4 (bits 0-1, 2-3) and of their mins (bits 4-5, 6-7), so one dword
 *              permute, a shift by dword and a mask put them in place for 4 super-blocks at once
 *              (kn__x86_q4kp_scales_mins says the same in scalar code);
 *   at 16n     128 bytes per super-block: its codes in the order kn__x86_q4kp_order gives: for
 *              j = 0..3, groups 2j and 2j + 1 (stored as the low and high nibbles of 32 bytes)
 *              become, as 32 bytes, the low nibbles lo and the high nibbles hi of
 *              kn__x86_q4kp_order(group 2j, group 2j + 1), which alternate the groups word by word.
 * The token's q come in the same order (kn__x86_q8_Kn_qp), so each word of a vpmaddubsw of lo and
 * of hi holds one group's products, the two add in int16 (at most 2 * 2 * 15 * 128 = 7680) and
 * one vpmaddwd by the pair of group scales (one dword broadcast) scales both groups: 4 vpmaddwd a
 * super-block instead of 8, and no word broadcasts. The scales of 8 super-blocks are unpacked in
 * about 40 instructions (the stored ones take about 18 a super-block). */
#define KN__X86_Q4KP_MAGIC 0x503256414b345158ull /* "XQ4KAV2P" */

/* Two groups' 32 values each (a, b: natural order) in the packed order: lo holds per 128-bit lane
 * L the words 8L .. 8L + 3 of a and of b alternating (a first), hi the words 8L + 4 .. 8L + 7. */
static inline void kn__x86_q4kp_order(__m256i a, __m256i b, __m256i *lo, __m256i *hi) {
    *lo = _mm256_unpacklo_epi16(a, b);
    *hi = _mm256_unpackhi_epi16(a, b);
}

/* The 8 scales and 8 mins (6 bits) of super-block i of a packed chunk ch of n super-blocks, from
 * its low nibbles lo = ch + 4n + 8i and high bits hb = ch + 12n + 4i, 8 bytes at a time. */
static inline void kn__x86_q4kp_scales_mins(const uint8_t *lo, const uint8_t *hb, uint8_t sc[8],
                                            uint8_t m[8]) {
    uint64_t l;
    uint32_t h;
    memcpy(&l, lo, 8);
    memcpy(&h, hb, 4);
    const uint64_t h3 = 0x03030303u, l4 = 0x0F0F0F0F0F0F0F0Full;
    const uint64_t s = (l & l4) | ((h & h3) | ((h >> 2) & h3) << 32) << 4;
    const uint64_t n = ((l >> 4) & l4) | (((h >> 4) & h3) | ((h >> 6) & h3) << 32) << 4;
    memcpy(sc, &s, 8);
    memcpy(m, &n, 8);
}

size_t kn__x86_q4kp_bytes(const kn_mat *W);
void kn__x86_q4kp_pack(const kn_mat *W, void *dst);
/* The tile decoder's packed twin (kn__x86_decode_q4_K) for a row of the packed copy. */
void kn__x86_decode_q4_Kp(const uint8_t *row, int64_t k, kn__x86_q4k *dst);

/* One full group of 8 stored Q8_0 blocks (272 bytes) to interleaved int8 weights: w[k] and
 * w[k + 4] hold dword k of elements 0..15 and of elements 16..31 of each block. */
static inline void kn__x86_q8_0_group(const uint8_t *row, __m256i w[8]) {
    __m256i lo[4], hi[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* [block i | block i + 4], first and second 16 weights */
        const uint8_t *a = row + KN__Q8_0_BYTES * i + 2, *b = a + 4 * KN__Q8_0_BYTES;
        lo[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                        _mm_loadu_si128((const __m128i *)b), 1);
        hi[i] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a + 16))),
            _mm_loadu_si128((const __m128i *)(b + 16)), 1);
    }
    kn__x86_transpose4(lo, w);
    kn__x86_transpose4(hi, w + 4);
}

/* d_w of the 8 blocks of a Q8_0 group as floats (F16C: exact). */
static inline __m256 kn__x86_q8_0_d(const uint8_t *row) {
    const __m128i h = _mm_setr_epi16((short)kn__rd16(row), (short)kn__rd16(row + 34),
                                     (short)kn__rd16(row + 68), (short)kn__rd16(row + 102),
                                     (short)kn__rd16(row + 136), (short)kn__rd16(row + 170),
                                     (short)kn__rd16(row + 204), (short)kn__rd16(row + 238));
    return _mm256_cvtph_ps(h);
}

/* A streaming kernel for a fixed number nt of tokens: rows n0 .. n1 of W against the prepared
 * tokens x[0 .. nt), into Y[t * ldy + row]. */
typedef void (*kn__x86_few_fn)(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy,
                               int64_t n0, int64_t n1);

/* Rows n0 .. n1 of W against all of x's tokens with a streaming kernel fns[n] (n = 1 .. few, few
 * at most KN__X86_PASS_MAX), in passes of at most `few` tokens as even as can be (each pass streams
 * the rows again). */
#define KN__X86_PASS_MAX 16
static inline void kn__x86_few_passes(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                      int64_t n0, int64_t n1, const kn__x86_few_fn *fns, int few) {
    const int64_t passes = (x->T + few - 1) / few;
    for (int64_t p = 0, t0 = 0; p < passes; p++) {
        const int64_t tn = (x->T - t0) / (passes - p); /* <= few */
        const uint8_t *xt[KN__X86_PASS_MAX];
        for (int64_t t = 0; t < tn; t++)
            xt[t] = (const uint8_t *)x->data + (size_t)(t0 + t) * x->stride;
        fns[tn](W, xt, Y + t0 * ldy, ldy, n0, n1);
        t0 += tn;
    }
}

/* The end of W's data: a streaming kernel may read a tail group's bytes in place up to here. */
static inline const uint8_t *kn__x86_mat_end(const kn_mat *W) {
    return (const uint8_t *)W->data + (size_t)(W->rows - 1) * W->row_bytes +
           kn_row_size(W->type, W->cols);
}

/* Lanes 0 .. n-1 all ones, the others zero (as floats, for masking scales). */
static inline __m256 kn__x86_live_lanes(int64_t n) {
    return _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* fp16 -> float with F16C: exact, the same value as kn__half_to_float (tested on all 65536). */
static inline float kn__x86_half(const uint8_t *p) {
    return _cvtsh_ss(kn__rd16(p));
}

/* A Q6_K super-block's 256 codes (0..63) in natural order, 32 per vector. */
static inline void kn__x86_q6k_codes(const uint8_t *blk, __m256i c[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03),
                  m30 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int n = 0; n < 2; n++) {
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * n));
        const __m256i l2 = _mm256_loadu_si256((const __m256i *)(blk + 64 * n + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
        c[4 * n] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
        c[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l2, m4),
                                       _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        c[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                       _mm256_and_si256(qh, m30));
        c[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    }
}

/* The int16 scale vectors of a Q6_K super-block's 32-chunks: chunk c gets scale 2c in lanes
 * 0..7 and 2c+1 in lanes 8..15 (one vpmaddwd then scales each group's pair sums). */
static inline void kn__x86_q6k_scales(const uint8_t *blk, __m256i s16[8]) {
    const __m256i all = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    const __m256i lo = _mm256_permute2x128_si256(all, all, 0x00); /* s0..s7 in both halves */
    const __m256i hi = _mm256_permute2x128_si256(all, all, 0x11); /* s8..s15 */
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const char a = (char)(4 * (c % 4)), b = (char)(4 * (c % 4) + 2); /* bytes of s_2c, s_2c+1 */
        const __m256i idx = _mm256_setr_epi8(
            a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, b,
            b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
        s16[c] = _mm256_shuffle_epi8(c < 4 ? lo : hi, idx);
    }
}

/* The Q6_K batch layout: 256 values (codes or q) in natural order as 8 vectors, where 128-bit lane
 * L of vector j holds group 2j + L as 8 pairs, become 8 vectors whose word (L, j) holds pair k of
 * group 2j + L in vector k (an 8 x 8 transpose of 16-bit words per 128-bit lane). Each word then
 * sees one group in every vector, so vpmaddubsw results of two vectors add in int16 (at most
 * 2 * 2 * 63 * 127 = 32004) before one vpmaddwd by the per-word group scales: 4 scale multiplies
 * per super-block instead of 8. */
static inline void kn__x86_q6k_interleave(__m256i v[8]) {
    __m256i t[8], u[8];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i *r = v + 4 * h;
        t[4 * h] = _mm256_unpacklo_epi16(r[0], r[1]);
        t[4 * h + 1] = _mm256_unpackhi_epi16(r[0], r[1]);
        t[4 * h + 2] = _mm256_unpacklo_epi16(r[2], r[3]);
        t[4 * h + 3] = _mm256_unpackhi_epi16(r[2], r[3]);
        u[4 * h] = _mm256_unpacklo_epi32(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi32(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        v[2 * i] = _mm256_unpacklo_epi64(u[i], u[4 + i]);
        v[2 * i + 1] = _mm256_unpackhi_epi64(u[i], u[4 + i]);
    }
}

/* The per-word group scales of the interleaved layout: word (L, j) gets scale 2j + L. */
static inline __m256i kn__x86_q6k_group_scales(const uint8_t *blk) {
    const __m128i sc = _mm_loadu_si128((const __m128i *)(blk + 192));
    return _mm256_cvtepi8_epi16(
        _mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
}

/* Lane j of the result: the sum of the 8 int32 of a[j] (exact; any order gives the same value): the
 * horizontal sums of 8 blocks at once, a few instructions each instead of one reduction apiece. */
static inline __m256i kn__x86_reduce8_i32(const __m256i a[8]) {
    /* per 128-bit half, the partial sums of a0..a3 (of a4..a7), then the halves added */
    const __m256i h0 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
    const __m256i h1 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(a[4], a[5]), _mm256_hadd_epi32(a[6], a[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
                            _mm256_permute2x128_si256(h0, h1, 0x31));
}

/* kn__tree8 on a vector: low half + high half, upper pair onto lower pair, then the last two. */
static inline float kn__x86_tree8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

/* Exact horizontal sum of 8 int32 (integer addition: any order gives the same value). */
static inline int32_t kn__x86_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* acc = fmaf((float)isum, scale, acc) for one lane of a canonical lane array. */
static inline void kn__x86_fma_lane(float *lane, int32_t isum, float scale) {
    __m128 r = _mm_fmadd_ss(_mm_set_ss((float)isum), _mm_set_ss(scale), _mm_set_ss(*lane));
    *lane = _mm_cvtss_f32(r);
}

#endif
