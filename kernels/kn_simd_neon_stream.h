/* kernels/kn_simd_neon_stream.h — internal to kn_simd_neon.c: the NEON row's Q8-mode kernels for
 * MXFP4, Q8_0, Q6_K and Q4_K weights, which stream each stored row once per pass of tokens.
 *
 * Why: an expert's share of a decode step is a few rows against a few tokens, and the bound is
 * the rate one core streams weight bytes. So each row is read once per pass (up to 8 tokens for
 * MXFP4 / Q8_0, whose per-token accumulators live in registers; up to 16 for the K-quants, whose
 * per-token sums go to a small stack tile), its codes decoded once per block in registers and
 * applied to every token of the pass with sdot; later passes of a larger batch find the row in L1.
 * The sums of several blocks are reduced together (pairwise adds, a lane per block), the weight
 * scales of a group of blocks are converted once, and the tokens' scales come in one vector load
 * (the prepared rows carry them as a zero-padded float array). No decode scratch is written.
 *
 * The canonical order (kn_internal.h) holds exactly: each block's integer sum is exact, goes to
 * lane b % 8 (blocks 8g..8g+3 in the low q-register, 8g+4..8g+7 in the high one) with the
 * reference's fma and scale product, and the lanes end in kn__tree8's order. Blocks past a row's
 * end are never read: their codes are zero, their scales 0, which leaves a lane (never -0) as it
 * was, whatever inf or NaN the bytes after the row hold. */
#ifndef KN_SIMD_NEON_STREAM_H
#define KN_SIMD_NEON_STREAM_H

#include "kernels/kn_internal.h"

#include <arm_neon.h>

#define KN__NEON_FEW  8    /* MXFP4 / Q8_0 tokens per pass: 2 q-register accumulators each */
#define KN__NEON_KFEW 16   /* K-quant tokens per pass (their sums wait in a stack tile) */
#define KN__NEON_PF   1024 /* software prefetch distance in bytes, into L1 */

/* ---- canonical reductions -------------------------------------------------------------------- */

/* kn__tree8 of lanes lo = 0..3, hi = 4..7. */
static inline float kn__neon_tree8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t s = vaddq_f32(lo, hi);
    const float32x2_t s2 = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

/* Four int32x4 partial vectors -> their four exact sums, in order. */
static inline int32x4_t kn__neon_sums4(const int32x4_t p[4]) {
    return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}

/* The lines of `bytes` bytes at p, KN__NEON_PF ahead (a prefetch never faults). */
#define KN__NEON_PREFETCH(p, bytes)                                                                \
    do {                                                                                           \
        _Pragma("GCC unroll 4") for (int o_ = 0; o_ < (bytes); o_ += 64)                           \
            __builtin_prefetch((const uint8_t *)(p) + KN__NEON_PF + o_);                           \
    } while (0)

static inline int64_t kn__neon_groups8(int64_t nb) {
    return (nb + 7) / 8;
}

/* ---- prepared activations -------------------------------------------------------------------- */

/* Q8_0 tokens for MXFP4 / Q8_0 weights: qs[nb][32] in natural order, then float d_x[8 * groups]
 * (zero padded). */
static size_t kn__neon_q8_0n_bytes(int64_t k) {
    const int64_t nb = k / KN__QK32;
    return (size_t)nb * KN__QK32 + (size_t)kn__neon_groups8(nb) * 8 * sizeof(float);
}

static void kn__neon_prep_q8_0n(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / KN__QK32;
    int8_t *qs = dst;
    float *dx = (float *)(qs + nb * KN__QK32);
    for (int64_t b = 0; b < nb; b++) {
        kn__block_q8_0 blk;
        kn__quant_q8_0_block(x + b * KN__QK32, &blk);
        memcpy(qs + b * KN__QK32, blk.qs, KN__QK32);
        dx[b] = kn__half_to_float(blk.d);
    }
    for (int64_t b = nb; b < kn__neon_groups8(nb) * 8; b++) dx[b] = 0.0f;
}

/* Q8_K tokens for the K-quants: the Q8_K blocks, then their d as float[8 * groups] (zero
 * padded), so a chunk of 8 super-blocks takes its tokens' scales in two loads. */
static size_t kn__neon_q8_Kn_bytes(int64_t k) {
    const int64_t nb = k / KN__QK_K;
    return (size_t)nb * KN__Q8_K_BYTES + (size_t)kn__neon_groups8(nb) * 8 * sizeof(float);
}

static void kn__neon_prep_q8_Kn(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / KN__QK_K;
    kn__quant_q8_K(x, dst, k);
    const kn__block_q8_K *blk = dst;
    float *dx = (float *)((uint8_t *)dst + nb * KN__Q8_K_BYTES);
    for (int64_t b = 0; b < nb; b++) dx[b] = blk[b].d;
    for (int64_t b = nb; b < kn__neon_groups8(nb) * 8; b++) dx[b] = 0.0f;
}

/* One prepared token as the kernels read it: its quants (Q8_0 qs, or Q8_K blocks) and d_x. */
typedef struct kn__neon_tok {
    const uint8_t *q;
    const float *dx;
} kn__neon_tok;

/* Tokens [t0, t0 + nt) of x, prepared in the layouts above (the quants take `qbytes`). */
static inline void kn__neon_toks(const kn__act *x, int64_t t0, int nt, size_t qbytes,
                                 kn__neon_tok *tok) {
    for (int t = 0; t < nt; t++) {
        const uint8_t *p = (const uint8_t *)x->data + (size_t)(t0 + t) * x->stride;
        tok[t] = (kn__neon_tok){p, (const float *)(p + qbytes)};
    }
}

/* ---- MXFP4 and Q8_0 ------------------------------------------------------------------------- */

/* n <= 4 blocks of a stored row from `blk` in registers: block j's codes as w[2j] (elements
 * 0..15) and w[2j + 1] (16..31); returns their weight scales (h(e), or d_w), 0 past n. */
static inline __attribute__((always_inline)) float32x4_t
kn__neon_decode4(const uint8_t *blk, bool mxfp4, int8x16_t kv, int8x16_t w[8], const int n) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    if (mxfp4) {
        uint64_t h[2] = {0, 0}; /* h(e) bit patterns, two to a word: two moves into the vector */
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            if (j < n) {
                const uint8_t *b = blk + j * KN__MXFP4_BYTES;
                const uint8x16_t q = vld1q_u8(b + 1);
                w[2 * j] = vqtbl1q_s8(kv, vandq_u8(q, m4));
                w[2 * j + 1] = vqtbl1q_s8(kv, vshrq_n_u8(q, 4));
                h[j / 2] |= (uint64_t)kn__e8m0_half_bits[b[0]] << (32 * (j % 2));
            } else {
                w[2 * j] = w[2 * j + 1] = vdupq_n_s8(0);
            }
        }
        return vreinterpretq_f32_u32(vcombine_u32(vcreate_u32(h[0]), vcreate_u32(h[1])));
    }
    uint64_t d = 0; /* the four fp16 d_w in one word: one move into the vector */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        if (j < n) {
            const uint8_t *b = blk + j * KN__Q8_0_BYTES;
            w[2 * j] = vld1q_s8((const int8_t *)b + 2);
            w[2 * j + 1] = vld1q_s8((const int8_t *)b + 18);
            d |= (uint64_t)kn__rd16(b) << (16 * j);
        } else {
            w[2 * j] = w[2 * j + 1] = vdupq_n_s8(0);
        }
    }
    return vcvt_f32_f16(vcreate_f16(d)); /* exact, as kn__half_to_float */
}

/* The decoded blocks against one token's blocks at xq (scales dx): the n exact block sums in the
 * lanes of one vector, then the canonical fma with d_x * scale_w into acc. */
static inline __attribute__((always_inline)) float32x4_t
kn__neon_apply4(const int8x16_t w[8], float32x4_t sw, const int8_t *xq, const float *dx,
                float32x4_t acc, bool mxfp4, const int n) {
    int32x4_t p[4];
    if (n == 4) { /* the four blocks' q in two loads */
        const int8x16x4_t q0 = vld1q_s8_x4(xq), q1 = vld1q_s8_x4(xq + 64);
        p[0] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[0], q0.val[0]), w[1], q0.val[1]);
        p[1] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[2], q0.val[2]), w[3], q0.val[3]);
        p[2] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[4], q1.val[0]), w[5], q1.val[1]);
        p[3] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[6], q1.val[2]), w[7], q1.val[3]);
    } else { /* a tail: no q read past the row's blocks */
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            p[j] = j < n ? vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[2 * j], vld1q_s8(xq + 32 * j)),
                                     w[2 * j + 1], vld1q_s8(xq + 32 * j + 16))
                         : vdupq_n_s32(0);
    }
    /* the reference's operand order: d_x * h(e) for MXFP4, d_w * d_x for Q8_0 (a NaN d_w keeps
     * its payload either way; the order is kept all the same) */
    const float32x4_t sc = mxfp4 ? vmulq_f32(vld1q_f32(dx), sw) : vmulq_f32(sw, vld1q_f32(dx));
    return vfmaq_f32(acc, vcvtq_f32_s32(kn__neon_sums4(p)), sc);
}

/* One stored row (nb blocks) against nt <= KN__NEON_FEW tokens, half a group (4 blocks) decoded
 * at a time; out[t] gets token t's dot. */
static inline __attribute__((always_inline)) void kn__neon_row32(const uint8_t *row, bool mxfp4,
                                                                 const kn__neon_tok *x, int64_t nb,
                                                                 float *out, const int nt) {
    const int bytes = mxfp4 ? KN__MXFP4_BYTES : KN__Q8_0_BYTES;
    const int8x16_t kv = vld1q_s8(kn__mxfp4_kvalues);
    float32x4_t acc[KN__NEON_FEW][2];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t *blk = row + (b + 4 * h) * bytes;
            int8x16_t w[8];
            KN__NEON_PREFETCH(blk, 4 * bytes);
            const float32x4_t sw = kn__neon_decode4(blk, mxfp4, kv, w, 4);
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++)
                acc[t][h] = kn__neon_apply4(w, sw, (const int8_t *)x[t].q + KN__QK32 * (b + 4 * h),
                                            x[t].dx + b + 4 * h, acc[t][h], mxfp4, 4);
        }
    }
    if (b < nb) { /* the tail group: 1..7 blocks, lanes past the row left as they are */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t b4 = b + 4 * h;
            if (b4 >= nb) break;
            const int n = nb - b4 < 4 ? (int)(nb - b4) : 4;
            int8x16_t w[8];
            const float32x4_t sw = kn__neon_decode4(row + b4 * bytes, mxfp4, kv, w, n);
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++)
                acc[t][h] = kn__neon_apply4(w, sw, (const int8_t *)x[t].q + KN__QK32 * b4,
                                            x[t].dx + b4, acc[t][h], mxfp4, n);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) out[t] = kn__neon_tree8(acc[t][0], acc[t][1]);
}

/* One function per token count, so each token loop unrolls and its accumulators stay in
 * registers; the table by count. */
typedef void (*kn__neon_row32_fn)(const uint8_t *row, bool mxfp4, const kn__neon_tok *x, int64_t nb,
                                  float *out);
#define KN__NEON_ROW32(nt)                                                                         \
    static void kn__neon_row32_##nt(const uint8_t *row, bool mxfp4, const kn__neon_tok *x,         \
                                    int64_t nb, float *out) {                                      \
        if (mxfp4)                                                                                 \
            kn__neon_row32(row, true, x, nb, out, nt);                                             \
        else                                                                                       \
            kn__neon_row32(row, false, x, nb, out, nt);                                            \
    }
KN__NEON_ROW32(1)
KN__NEON_ROW32(2)
KN__NEON_ROW32(3)
KN__NEON_ROW32(4)
KN__NEON_ROW32(5)
KN__NEON_ROW32(6)
KN__NEON_ROW32(7)
KN__NEON_ROW32(8)
static const kn__neon_row32_fn kn__neon_row32_by_nt[KN__NEON_FEW + 1] = {NULL,
                                                                         kn__neon_row32_1,
                                                                         kn__neon_row32_2,
                                                                         kn__neon_row32_3,
                                                                         kn__neon_row32_4,
                                                                         kn__neon_row32_5,
                                                                         kn__neon_row32_6,
                                                                         kn__neon_row32_7,
                                                                         kn__neon_row32_8};

/* ---- Q6_K and Q4_K --------------------------------------------------------------------------- */

/* A decoded super-block: 16 vectors of codes, v[i] against elements 16i..16i+15 of the token
 * (Q6_K: code - 32; Q4_K: 0..15), and the group scales as int32 lanes (Q6_K: 16 groups of one
 * vector, sc[k] lane l = group 4k + l; Q4_K: 8 groups of two vectors, sc[0..1]) and Q4_K's mins
 * as 8 int16 words. */
typedef struct kn__neon_kblock {
    int8x16_t v[16];
    int32x4_t sc[4];
    int16x8_t m;
} kn__neon_kblock;

static inline __attribute__((always_inline)) void kn__neon_decode_q6_K(const uint8_t *w,
                                                                       kn__neon_kblock *k) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
    const int8x16_t m32 = vdupq_n_s8(32);
#pragma GCC unroll 2
    for (int n = 0; n < 2; n++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) { /* elements 128n + 32q + 16h + l: vector 8n + 2q + h */
            const uint8x16_t a = vld1q_u8(w + 64 * n + 16 * h);
            const uint8x16_t c = vld1q_u8(w + 64 * n + 32 + 16 * h);
            const uint8x16_t qh = vld1q_u8(w + 128 + 32 * n + 16 * h);
            /* low nibble | two bits of qh << 4 (sli keeps the destination's low 4 bits) */
            const uint8x16_t code[4] = {
                vsliq_n_u8(vandq_u8(a, m4), vandq_u8(qh, m3), 4),
                vsliq_n_u8(vandq_u8(c, m4), vandq_u8(vshrq_n_u8(qh, 2), m3), 4),
                vsliq_n_u8(vshrq_n_u8(a, 4), vandq_u8(vshrq_n_u8(qh, 4), m3), 4),
                vsliq_n_u8(vshrq_n_u8(c, 4), vshrq_n_u8(qh, 6), 4)};
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++)
                k->v[8 * n + 2 * q + h] = vsubq_s8(vreinterpretq_s8_u8(code[q]), m32);
        }
    const int8x16_t s = vld1q_s8((const int8_t *)w + 192);
    const int16x8_t s0 = vmovl_s8(vget_low_s8(s)), s1 = vmovl_high_s8(s);
    k->sc[0] = vmovl_s16(vget_low_s16(s0)), k->sc[1] = vmovl_high_s16(s0);
    k->sc[2] = vmovl_s16(vget_low_s16(s1)), k->sc[3] = vmovl_high_s16(s1);
}

static inline __attribute__((always_inline)) void kn__neon_decode_q4_K(const uint8_t *w,
                                                                       kn__neon_kblock *k) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* 32 code bytes: groups 2j (low nibbles), 2j + 1 (high) */
        const uint8x16_t q0 = vld1q_u8(w + 16 + 32 * j), q1 = vld1q_u8(w + 32 + 32 * j);
        k->v[4 * j] = vreinterpretq_s8_u8(vandq_u8(q0, m4));
        k->v[4 * j + 1] = vreinterpretq_s8_u8(vandq_u8(q1, m4));
        k->v[4 * j + 2] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
        k->v[4 * j + 3] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
    }
    /* kn__q4k_scale_min on the 12 packed bytes as three 32-bit words, four values at a time */
    uint32_t u[3];
    memcpy(u, w + 4, sizeof u);
    const uint64_t sc = (uint64_t)(u[0] & 0x3f3f3f3fu) |
                        (uint64_t)((u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u)) << 32;
    const uint64_t mn = (uint64_t)(u[1] & 0x3f3f3f3fu) |
                        (uint64_t)(((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u)) << 32;
    const uint16x8_t sc16 = vmovl_u8(vcreate_u8(sc));
    k->sc[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc16)));
    k->sc[1] = vreinterpretq_s32_u32(vmovl_high_u16(sc16));
    k->m = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mn)));
}

/* A decoded super-block against one Q8_K block: *is gets 4 lanes summing to the scaled code sum,
 * *ms (Q4_K) 4 lanes summing to the mins times the group sums of q (both exact). */
static inline __attribute__((always_inline)) void kn__neon_kdot(const kn__neon_kblock *k, bool q4,
                                                                const kn__block_q8_K *x,
                                                                int32x4_t *is, int32x4_t *ms) {
    int32x4_t p[16];
    if (q4) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) { /* 64 values of q per load */
            const int8x16x4_t q = vld1q_s8_x4(x->qs + 64 * i);
            p[2 * i] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), k->v[4 * i], q.val[0]), k->v[4 * i + 1],
                                 q.val[1]);
            p[2 * i + 1] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), k->v[4 * i + 2], q.val[2]),
                                     k->v[4 * i + 3], q.val[3]);
        }
        *is = vmlaq_s32(vmulq_s32(kn__neon_sums4(p), k->sc[0]), kn__neon_sums4(p + 4), k->sc[1]);
        const int16x8_t bs =
            vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8)); /* |.| < 2^12 */
        *ms = vmlal_high_s16(vmull_s16(vget_low_s16(bs), vget_low_s16(k->m)), bs, k->m);
        return;
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const int8x16x4_t q = vld1q_s8_x4(x->qs + 64 * i);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++)
            p[4 * i + g] = vdotq_s32(vdupq_n_s32(0), k->v[4 * i + g], q.val[g]);
    }
    int32x4_t s = vmulq_s32(kn__neon_sums4(p), k->sc[0]);
#pragma GCC unroll 3
    for (int i = 1; i < 4; i++) s = vmlaq_s32(s, kn__neon_sums4(p + 4 * i), k->sc[i]);
    *is = s;
    *ms = vdupq_n_s32(0);
}

/* n <= 8 super-blocks (a chunk, from block b0) of a stored row against nt <= KN__NEON_KFEW
 * tokens: each super-block decoded once, its sums for every token kept in a tile; then per token
 * the chunk's sums reduced together, the weights' d (and dmin) converted once, and the canonical
 * fmas (Q4_K: the code sum's, then the mins') into lanes b % 8 of lane[t]. */
static inline __attribute__((always_inline)) void kn__neon_kchunk(const uint8_t *blk, bool q4,
                                                                  const kn__neon_tok *x, int64_t b0,
                                                                  int nt, float32x4_t (*lane)[2],
                                                                  const int n) {
    const int bytes = q4 ? KN__Q4_K_BYTES : KN__Q6_K_BYTES;
    int32x4_t is[KN__NEON_KFEW][8], ms[KN__NEON_KFEW][8];
    uint16_t dw[8] = {0}, mw[8] = {0};
#pragma GCC unroll 1
    for (int j = 0; j < 8; j++, blk += bytes) {
        if (j >= n) {
            for (int t = 0; t < nt; t++) is[t][j] = ms[t][j] = vdupq_n_s32(0);
            continue;
        }
        KN__NEON_PREFETCH(blk, bytes);
        kn__neon_kblock k;
        if (q4) {
            kn__neon_decode_q4_K(blk, &k);
            dw[j] = kn__rd16(blk), mw[j] = kn__rd16(blk + 2);
        } else {
            kn__neon_decode_q6_K(blk, &k);
            dw[j] = kn__rd16(blk + 208);
        }
#pragma GCC unroll 1
        for (int t = 0; t < nt; t++)
            kn__neon_kdot(&k, q4, (const kn__block_q8_K *)x[t].q + b0 + j, &is[t][j], &ms[t][j]);
    }
    const float32x4_t dl = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(dw)));
    const float32x4_t dh = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(dw + 4)));
    const float32x4_t ml = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(mw)));
    const float32x4_t mh = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(mw + 4)));
    for (int t = 0; t < nt; t++) {
        const float32x4_t xl = vld1q_f32(x[t].dx + b0), xh = vld1q_f32(x[t].dx + b0 + 4);
        lane[t][0] = vfmaq_f32(lane[t][0], vcvtq_f32_s32(kn__neon_sums4(is[t])), vmulq_f32(dl, xl));
        lane[t][1] =
            vfmaq_f32(lane[t][1], vcvtq_f32_s32(kn__neon_sums4(is[t] + 4)), vmulq_f32(dh, xh));
        if (q4) { /* fma((float)msum, -(dmin * d_x), lane) */
            lane[t][0] = vfmaq_f32(lane[t][0], vcvtq_f32_s32(kn__neon_sums4(ms[t])),
                                   vnegq_f32(vmulq_f32(ml, xl)));
            lane[t][1] = vfmaq_f32(lane[t][1], vcvtq_f32_s32(kn__neon_sums4(ms[t] + 4)),
                                   vnegq_f32(vmulq_f32(mh, xh)));
        }
    }
}

/* One stored row (nb super-blocks) against nt <= KN__NEON_KFEW tokens; out[t] gets token t's dot.
 */
static inline __attribute__((always_inline)) void
kn__neon_krow(const uint8_t *row, bool q4, const kn__neon_tok *x, int64_t nb, int nt, float *out) {
    const int bytes = q4 ? KN__Q4_K_BYTES : KN__Q6_K_BYTES;
    float32x4_t lane[KN__NEON_KFEW][2];
    for (int t = 0; t < nt; t++) lane[t][0] = lane[t][1] = vdupq_n_f32(0.0f);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) kn__neon_kchunk(row + b * bytes, q4, x, b, nt, lane, 8);
    if (b < nb) kn__neon_kchunk(row + b * bytes, q4, x, b, nt, lane, (int)(nb - b));
    for (int t = 0; t < nt; t++) out[t] = kn__neon_tree8(lane[t][0], lane[t][1]);
}

/* ---- row loops ------------------------------------------------------------------------------- */

/* Rows n0 .. n1 of W against the T tokens of x: per row, passes of up to `few` tokens (split as
 * evenly as can be), so the row comes from memory once and from L1 for later passes. */
static inline __attribute__((always_inline)) void kn__neon_rows(const kn_mat *W, const kn__act *x,
                                                                float *Y, int64_t ldy, int64_t n0,
                                                                int64_t n1, kn_type type) {
    const bool kq = type == KN_Q6_K || type == KN_Q4_K;
    const int few = kq ? KN__NEON_KFEW : KN__NEON_FEW;
    const int64_t nb = W->cols / (kq ? KN__QK_K : KN__QK32), T = x->T;
    const int64_t passes = (T + few - 1) / few;
    const size_t qbytes = (size_t)nb * (kq ? KN__Q8_K_BYTES : KN__QK32);
    for (int64_t r = n0; r < n1; r++) {
        const uint8_t *row = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        for (int64_t p = 0; p < passes; p++) {
            const int64_t t0 = T * p / passes;
            const int nt = (int)(T * (p + 1) / passes - t0);
            kn__neon_tok tok[KN__NEON_KFEW];
            float out[KN__NEON_KFEW];
            kn__neon_toks(x, t0, nt, qbytes, tok);
            if (type == KN_Q4_K)
                kn__neon_krow(row, true, tok, nb, nt, out);
            else if (type == KN_Q6_K)
                kn__neon_krow(row, false, tok, nb, nt, out);
            else
                kn__neon_row32_by_nt[nt](row, type == KN_MXFP4, tok, nb, out);
            for (int t = 0; t < nt; t++) Y[(t0 + t) * ldy + r] = out[t];
        }
    }
}

#endif
