/* metal/mt_kernels.metal — the expert path on Apple GPUs: activation quantization (Q8_0, Q8_K),
 * grouped matmul for the rows an expert receives in MXFP4, Q8_0, Q4_K and Q6_K (matvec, a tiled
 * kernel for larger batches, float lanes), the GLU policies and the weighted partial sum.
 *
 * Every kernel follows the canonical reduction order of kernels/ (docs/kernels.md): in Q8 mode
 * block b's exact integer sum goes into block lane b % 8 with one fma, and the 8 lanes reduce as
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) — here a butterfly of simd_shuffle_xor over
 * 4, 2 and 1, which leaves exactly that sum in lane 0; in float mode element k goes into lane
 * k % 32 with fma and the 32 lanes fold over 8, 16, then the 8-lane tree. So every result is,
 * operation for operation, what the CPU computes: bit-identical where the GPU rounds as IEEE 754
 * says (the host compiles with fast math off). Weights are read in place as the CPU reads them:
 * byte by byte, no alignment assumed. No kernel reduces a float with simd_sum, whose order Metal
 * does not define.
 *
 * All kernels take the same parameters (MT_PARAMS), so one host routine binds any of them. This
 * file is also compiled as C++ by the emulator (metal/emu/), which defines MT_KERNEL to register
 * each kernel by name. */
#include <metal_stdlib>
using namespace metal;

#ifndef MT_ARGS_H
#include "metal/mt_args.h"
#endif

#ifndef MT_KERNEL
#define MT_KERNEL(name) kernel void name
#endif
/* The threadgroup-memory attribute (the emulator, where `threadgroup` is a macro, empties it). */
#ifndef MT_TG_ATTR
#define MT_TG_ATTR [[threadgroup(0)]]
#endif

/* w: weights (or a kernel's first input); x: activations; y: output; ix: index lists; bias:
 * per-output addends; tg: threadgroup memory (index 0). */
#define MT_PARAMS                                                                                  \
    constant mt_args &p [[buffer(0)]], device const uchar *w [[buffer(1)]],                      \
        device const uchar *x [[buffer(2)]], device uchar *y [[buffer(3)]],                        \
        device const int *ix [[buffer(4)]], device const float *bias [[buffer(5)]],                \
        threadgroup uchar *tg MT_TG_ATTR, uint3 tgp [[threadgroup_position_in_grid]],     \
        ushort sg [[simdgroup_index_in_threadgroup]], ushort ln [[thread_index_in_simdgroup]]

/* Block geometry per format: elements, weight bytes, activation bytes (Q8_0 or Q8_K). */
#define MT_QK(F) ((F) == MT_FMT_Q4_K || (F) == MT_FMT_Q6_K ? 256 : 32)
#define MT_WB(F) ((F) == MT_FMT_MXFP4 ? 17 : (F) == MT_FMT_Q8_0 ? 34 : (F) == MT_FMT_Q4_K ? 144 : 210)
#define MT_XB(F) (MT_QK(F) == 32 ? 34 : 292)

/* ---- scalars: bytes, fp16, E8M0, rounding (integer arithmetic: the same bits everywhere) ---- */

template <typename P> static inline uint mt_u16(P b) {
    return uint(b[0]) | uint(b[1]) << 8;
}
template <typename P> static inline uint mt_u32(P b) {
    return mt_u16(b) | mt_u16(b + 2) << 16;
}
template <typename P> static inline int mt_i16(P b) {
    const int v = int(mt_u16(b));
    return v >= 32768 ? v - 65536 : v;
}
static inline float mt_bits(uint u) {
    return as_type<float>(u);
}
static inline int mt_i8(uint b) {
    return int(b) - (int(b) & 128) * 2;
}

/* fp16 to float, exact (subnormals included). */
static inline float mt_half(uint h) {
    const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return mt_bits(sign | 0x7F800000u | (m << 13));
    if (e != 0u) return mt_bits(sign | ((e + 112u) << 23) | (m << 13));
    const float v = float(m) * mt_bits(0x33800000u); /* m * 2^-24: exact */
    return sign != 0u ? -v : v;
}

/* float to fp16, round to nearest even (kn_f32_to_fp16). */
static inline uint mt_to_half(float f) {
    const uint u = as_type<uint>(f), sign = (u >> 16) & 0x8000u, man = u & 0x7FFFFFu;
    const int e = int((u >> 23) & 0xFFu) - 127 + 15;
    if (((u >> 23) & 0xFFu) == 0xFFu) return sign | 0x7C00u | (man != 0u ? 0x200u | (man >> 13) : 0u);
    if (e >= 0x1F) return sign | 0x7C00u;
    if (e <= 0) {
        if (e < -10) return sign;
        const uint m = man | 0x800000u, shift = uint(14 - e);
        uint q = m >> shift;
        const uint rem = m & ((1u << shift) - 1u), half_ulp = 1u << (shift - 1u);
        if (rem > half_ulp || (rem == half_ulp && (q & 1u) != 0u)) q++;
        return sign | q;
    }
    uint q = (uint(e) << 10) | (man >> 13);
    const uint rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u) != 0u)) q++;
    return sign | q;
}

/* MXFP4's E8M0 byte as 2^(e-128): ggml's "halved" scale, subnormal for e = 0 and 1. */
static inline float mt_e8m0_half(uint e) {
    return mt_bits(e >= 2u ? (e - 1u) << 23 : 0x00200000u << (e & 1u));
}

/* Round half to even, saturated to [-127, 127]; NaN gives 0 (kn_round_q8). */
static inline int mt_round_q8(float v) {
    float r = rint(v);
    if (!(r >= -127.0f)) r = r != r ? 0.0f : -127.0f;
    if (r > 127.0f) r = 127.0f;
    return int(r);
}

constant int mt_kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Q6_K: the 6-bit code (0..63) of weight i of a super-block. */
template <typename P> static inline int mt_q6k_code(P b, int i) {
    const int n = i >> 7, r = i & 127, l = r & 31, quarter = r >> 5;
    const uint lo = b[64 * n + l + (quarter & 1) * 32];
    const uint low = (quarter & 2) != 0 ? lo >> 4 : lo & 15u;
    return int(low | ((uint(b[128 + 32 * n + l]) >> uint(2 * quarter)) & 3u) << 4);
}

/* Q4_K: the 6-bit scale and min of group g (0..7), from the 12 packed bytes at s. */
template <typename P> static inline int mt_q4k_scale(P s, int g) {
    return g < 4 ? int(s[g] & 63u) : int((s[g + 4] & 15u) | (uint(s[g - 4]) >> 6) << 4);
}
template <typename P> static inline int mt_q4k_min(P s, int g) {
    return g < 4 ? int(s[g + 4] & 63u) : int((uint(s[g + 4]) >> 4) | (uint(s[g]) >> 6) << 4);
}

/* ---- exp and the GLU policies (kernels/glu.c, kn_expf: the same operations) ---------------- */

static inline float mt_expf(float v) {
    if (v != v) return v;
    if (v > mt_bits(0x42B17218u)) return mt_bits(0x7F800000u); /* above KN_EXP_MAX: +inf */
    if (v < mt_bits(0xC2CFF1B5u)) return 0.0f;                 /* below KN_EXP_MIN: +0 */
    const float n = rint(v * mt_bits(0x3FB8AA3Bu));             /* log2(e) */
    float r = fma(n, -mt_bits(0x3F317200u), v);                 /* ln 2, high part */
    r = fma(n, -mt_bits(0x35BFBE8Eu), r);                       /* ln 2, low part */
    float q = mt_bits(0x39500D01u);                             /* 1/5040 */
    q = fma(q, r, mt_bits(0x3AB60B61u));                        /* 1/720 */
    q = fma(q, r, mt_bits(0x3C088889u));                        /* 1/120 */
    q = fma(q, r, mt_bits(0x3D2AAAABu));                        /* 1/24 */
    q = fma(q, r, mt_bits(0x3E2AAAABu));                        /* 1/6 */
    q = fma(q, r, 0.5f);
    q = fma(q, r, 1.0f);
    q = fma(q, r, 1.0f);
    int e = int(n);
    if (e > 127) {
        q = q * mt_bits(0x7F000000u); /* 2^127 */
        e -= 127;
    } else if (e < -126) {
        q = q * mt_bits(uint(e + 126 + 127) << 23);
        e = -126;
    }
    return q * mt_bits(uint(e + 127) << 23);
}

/* tanh (kn_tanhf): an odd polynomial below |x| = 0.5, 1 - 2 / (exp(2|x|) + 1) above; the sign of
 * x put back at the end. */
static inline float mt_tanhf(float v) {
    const float a = fabs(v);
    float r;
    if (a < 0.5f) {
        const float a2 = a * a;
        float q = mt_bits(0xBABED1B2u); /* Taylor's coefficients, x^15 down to x^3 */
        q = fma(q, a2, mt_bits(0x3B6B69E8u));
        q = fma(q, a2, mt_bits(0xBC11371Bu));
        q = fma(q, a2, mt_bits(0x3CB327A4u));
        q = fma(q, a2, mt_bits(0xBD5D0DD1u));
        q = fma(q, a2, mt_bits(0x3E088889u));
        q = fma(q, a2, mt_bits(0xBEAAAAABu));
        r = fma(a2 * a, q, a);
    } else {
        r = 1.0f - 2.0f / (mt_expf(a + a) + 1.0f);
    }
    return copysign(r, v);
}

static inline float mt_swiglu(float g, float u) {
    return g / (1.0f + mt_expf(-g)) * u;
}

/* gpt-oss: the gate clamped above only, the up projection on both sides; a NaN stays a NaN. */
static inline float mt_swiglu_oai(float g, float u, float alpha, float limit) {
    const float gc = g > limit ? limit : g;
    const float uc = u < -limit ? -limit : u > limit ? limit : u;
    return gc / (1.0f + mt_expf(-(alpha * gc))) * (uc + 1.0f);
}

/* Kimi K3: the gate soft-capped by beta times sigmoid(g) (as a division), times the up branch,
 * soft-capped itself when lbeta > 0. */
static inline float mt_situ(float g, float u, float beta, float lbeta) {
    const float gate = beta * mt_tanhf(g / beta) / (1.0f + mt_expf(-g));
    return gate * (lbeta > 0.0f ? lbeta * mt_tanhf(u / lbeta) : u);
}

/* ---- one block of a Q8-mode dot: the exact integer sum, then its fma into the block lane ---- */

template <int F, typename P, typename Q> static inline float mt_block(P wb, Q xb, float acc) {
    if (F == MT_FMT_MXFP4) { /* e, qs[16] against Q8_0 (d, qs[32]) */
        int s = 0;
        for (int j = 0; j < 16; j++) {
            const uint b = wb[1 + j];
            s += mt_kvalues[b & 15u] * mt_i8(xb[2 + j]) + mt_kvalues[b >> 4] * mt_i8(xb[18 + j]);
        }
        return fma(float(s), mt_half(mt_u16(xb)) * mt_e8m0_half(wb[0]), acc);
    }
    if (F == MT_FMT_Q8_0) { /* d, qs[32] against Q8_0 */
        int s = 0;
        for (int j = 0; j < 32; j++) s += mt_i8(wb[2 + j]) * mt_i8(xb[2 + j]);
        return fma(float(s), mt_half(mt_u16(wb)) * mt_half(mt_u16(xb)), acc);
    }
    if (F == MT_FMT_Q6_K) { /* ql[128], qh[64], scales[16], d against Q8_K (d, qs[256], bsums) */
        int s = 0;
        for (int i = 0; i < 256; i++)
            s += mt_i8(wb[192 + (i >> 4)]) * (mt_q6k_code(wb, i) - 32) * mt_i8(xb[4 + i]);
        return fma(float(s), mt_half(mt_u16(wb + 208)) * mt_bits(mt_u32(xb)), acc);
    }
    /* Q4_K: d, dmin, scales[12], qs[128] against Q8_K; the mins against the block sums follow
     * as a second fma into the same lane */
    int s = 0, m = 0;
    for (int g = 0; g < 8; g++) {
        int gs = 0;
        for (int l = 0; l < 32; l++) {
            const uint b = wb[16 + 32 * (g >> 1) + l];
            gs += int((g & 1) != 0 ? b >> 4 : b & 15u) * mt_i8(xb[4 + 32 * g + l]);
        }
        s += mt_q4k_scale(wb + 4, g) * gs;
        m += mt_q4k_min(wb + 4, g) * (mt_i16(xb + 260 + 4 * g) + mt_i16(xb + 262 + 4 * g));
    }
    const float dx = mt_bits(mt_u32(xb));
    acc = fma(float(s), mt_half(mt_u16(wb)) * dx, acc);
    return fma(float(m), -(mt_half(mt_u16(wb + 2)) * dx), acc);
}

/* Weight k of a row, dequantized exactly as kernels/ does. */
template <int F, typename P> static inline float mt_deq(P row, int k) {
    if (F == MT_FMT_MXFP4) {
        P b = row + (k >> 5) * 17;
        const int i = k & 31;
        const uint q = b[1 + (i & 15)];
        return float(mt_kvalues[i < 16 ? q & 15u : q >> 4]) * mt_e8m0_half(b[0]);
    }
    if (F == MT_FMT_Q8_0) {
        P b = row + (k >> 5) * 34;
        return float(mt_i8(b[2 + (k & 31)])) * mt_half(mt_u16(b));
    }
    if (F == MT_FMT_Q6_K) {
        P b = row + (k >> 8) * 210;
        const int i = k & 255;
        return mt_half(mt_u16(b + 208)) * float(mt_i8(b[192 + (i >> 4)])) *
               float(mt_q6k_code(b, i) - 32);
    }
    P b = row + (k >> 8) * 144;
    const int i = k & 255, g = i >> 5;
    const uint q = b[16 + 32 * (g >> 1) + (i & 31)];
    const float d1 = mt_half(mt_u16(b)) * float(mt_q4k_scale(b + 4, g));
    const float m1 = mt_half(mt_u16(b + 2)) * float(mt_q4k_min(b + 4, g));
    return d1 * float((g & 1) != 0 ? q >> 4 : q & 15u) - m1;
}

/* ---- lane trees and rows -------------------------------------------------------------------- */

/* The 8-lane tree over lanes 8q .. 8q+7: lane 8q gets ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
 * (l3 + l7)); addition commutes bit for bit, so the butterfly's partner order does not matter.
 * Four sums at a time as a float4 (each component its own tree): a quarter of the shuffles. */
template <typename T> static inline T mt_tree8(T v) {
    v = v + simd_shuffle_xor(v, ushort(4));
    v = v + simd_shuffle_xor(v, ushort(2));
    return v + simd_shuffle_xor(v, ushort(1));
}

/* The 32-lane tree: lane i < 8 first holds (l_i + l_{i+8}) + (l_{i+16} + l_{i+24}). */
template <typename T> static inline T mt_tree32(T v) {
    v = v + simd_shuffle_xor(v, ushort(8));
    v = v + simd_shuffle_xor(v, ushort(16));
    return mt_tree8(v);
}

/* Reduces sums s[0 .. 4n) with `tree`, four at a time, in place. */
#define MT_REDUCE4(s, n, tree)                                                                     \
    for (int i4 = 0; i4 < (n); i4++) {                                                             \
        const float4 v = tree(float4(s[4 * i4], s[4 * i4 + 1], s[4 * i4 + 2], s[4 * i4 + 3]));     \
        s[4 * i4] = v.x, s[4 * i4 + 1] = v.y, s[4 * i4 + 2] = v.z, s[4 * i4 + 3] = v.w;            \
    }

static inline device const uchar *mt_xrow(constant mt_args &p, device const uchar *x,
                                          device const int *ix, int t) {
    const int r = p.x_index < 0 ? t : ix[p.x_index + t];
    return x + ulong(r) * ulong(p.x_stride);
}

/* Output n of token t: the dot, then the bias added to it (kernels/ adds it after the dot too). */
static inline void mt_store(constant mt_args &p, device uchar *y, device const int *ix,
                            device const float *bias, int t, int n, float v) {
    const int r = p.y_index < 0 ? t : ix[p.y_index + t];
    if (p.has_bias != 0) v = v + bias[n];
    ((device float *)(y + ulong(r) * ulong(p.y_stride)))[n] = v;
}

/* ---- Q8 mode: matvec ---------------------------------------------------------------------------
 * grid (ceil(rows / 16), tokens): lane 8r + j of SIMD-group s takes row 16 * tgp.x + 4s + r and
 * blocks j, j + 8, ... of token tgp.y. */
template <int F>
static inline void mt_mv(constant mt_args &p, device const uchar *w, device const uchar *x,
                         device uchar *y, device const int *ix, device const float *bias,
                         uint3 tgp, ushort sg, ushort ln) {
    const int nb = p.cols / MT_QK(F), j = ln & 7, t = int(tgp.y);
    const int n = (int(tgp.x) * MT_SG_PER_TG + sg) * MT_MV_ROWS + (ln >> 3);
    const bool live = n < p.rows;
    float acc = 0.0f;
    if (live) {
        device const uchar *row = w + ulong(n) * ulong(p.w_stride);
        device const uchar *xr = mt_xrow(p, x, ix, t);
        for (int b = j; b < nb; b += MT_QLANES)
            acc = mt_block<F>(row + b * MT_WB(F), xr + b * MT_XB(F), acc);
    }
    acc = mt_tree8(acc); /* every lane takes part, live or not */
    if (live && j == 0) mt_store(p, y, ix, bias, t, n, acc);
}

/* ---- Q8 mode: tiled ----------------------------------------------------------------------------
 * grid (ceil(rows / 8), ceil(tokens / 32)): the threadgroup copies the next 8 blocks of its 8 rows
 * into threadgroup memory (MT_MM_ROWS * 8 * MT_WB bytes), then SIMD-group s applies them to its
 * tokens 32 * tgp.y + 8s .. + 7: lane 8q + j computes block j for tokens q and q + 4 of every row,
 * so the weights leave memory once per 32 tokens. */
template <int F>
static inline void mt_mm(constant mt_args &p, device const uchar *w, device const uchar *x,
                         device uchar *y, device const int *ix, device const float *bias,
                         threadgroup uchar *tg, uint3 tgp, ushort sg, ushort ln) {
    const int nb = p.cols / MT_QK(F), WB = MT_WB(F), q = ln >> 3, j = ln & 7;
    const int n0 = int(tgp.x) * MT_MM_ROWS;
    const int t0 = int(tgp.y) * (MT_SG_PER_TG * MT_MM_TOKENS) + sg * MT_MM_TOKENS + q;
    const int tid = sg * MT_SIMD + ln;
    float acc[MT_MM_ROWS * 2]; /* (row r, token t0 + 4h) at 2r + h */
    for (int i = 0; i < MT_MM_ROWS * 2; i++) acc[i] = 0.0f;
    for (int b0 = 0; b0 < nb; b0 += MT_QLANES) {
        const int span = min(MT_QLANES, nb - b0) * WB; /* bytes of each row this step */
        for (int i = tid; i < MT_MM_ROWS * span; i += MT_TG_THREADS) {
            const int r = i / span, o = i - r * span;
            if (n0 + r < p.rows)
                tg[r * MT_QLANES * WB + o] =
                    w[ulong(n0 + r) * ulong(p.w_stride) + ulong(b0 * WB + o)];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (j * WB < span) {
            for (int h = 0; h < 2; h++) {
                const int t = t0 + 4 * h;
                if (t >= p.tokens) continue;
                device const uchar *xb = mt_xrow(p, x, ix, t) + (b0 + j) * MT_XB(F);
                for (int r = 0; r < MT_MM_ROWS && n0 + r < p.rows; r++)
                    acc[2 * r + h] = mt_block<F>(tg + (r * MT_QLANES + j) * WB, xb, acc[2 * r + h]);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    MT_REDUCE4(acc, MT_MM_ROWS / 2, mt_tree8)
    for (int r = 0; r < MT_MM_ROWS; r++)
        for (int h = 0; h < 2; h++)
            if (j == 0 && n0 + r < p.rows && t0 + 4 * h < p.tokens)
                mt_store(p, y, ix, bias, t0 + 4 * h, n0 + r, acc[2 * r + h]);
}

/* ---- float lanes -------------------------------------------------------------------------------
 * grid (ceil(rows / 4), ceil(tokens / 8)): SIMD-group s takes row 4 * tgp.x + s, lane i elements
 * i, i + 32, ... dequantized once and applied to tokens 8 * tgp.y .. + 7. */
template <int F>
static inline void mt_f32(constant mt_args &p, device const uchar *w, device const uchar *x,
                          device uchar *y, device const int *ix, device const float *bias,
                          uint3 tgp, ushort sg, ushort ln) {
    const int n = int(tgp.x) * MT_SG_PER_TG + sg, t0 = int(tgp.y) * MT_F32_TOKENS;
    const int nt = min(MT_F32_TOKENS, p.tokens - t0);
    const bool live = n < p.rows;
    float acc[MT_F32_TOKENS];
    for (int u = 0; u < MT_F32_TOKENS; u++) acc[u] = 0.0f;
    if (live) {
        device const uchar *row = w + ulong(n) * ulong(p.w_stride);
        device const float *xr[MT_F32_TOKENS];
        for (int u = 0; u < nt; u++) xr[u] = (device const float *)mt_xrow(p, x, ix, t0 + u);
        for (int k = ln; k < p.cols; k += MT_SIMD) {
            const float wk = mt_deq<F>(row, k);
            for (int u = 0; u < nt; u++) acc[u] = fma(wk, xr[u][k], acc[u]);
        }
    }
    MT_REDUCE4(acc, MT_F32_TOKENS / 4, mt_tree32)
    for (int u = 0; u < nt; u++)
        if (live && ln == 0) mt_store(p, y, ix, bias, t0 + u, n, acc[u]);
}

#define MT_MATMUL_KERNELS(fmt, F)                                                                  \
    MT_KERNEL(mt_mv_##fmt)(MT_PARAMS) {                                                            \
        mt_mv<F>(p, w, x, y, ix, bias, tgp, sg, ln);                                               \
    }                                                                                              \
    MT_KERNEL(mt_mm_##fmt)(MT_PARAMS) {                                                            \
        mt_mm<F>(p, w, x, y, ix, bias, tg, tgp, sg, ln);                                           \
    }                                                                                              \
    MT_KERNEL(mt_f32_##fmt)(MT_PARAMS) {                                                           \
        mt_f32<F>(p, w, x, y, ix, bias, tgp, sg, ln);                                              \
    }

MT_MATMUL_KERNELS(mxfp4, MT_FMT_MXFP4)
MT_MATMUL_KERNELS(q8_0, MT_FMT_Q8_0)
MT_MATMUL_KERNELS(q4_K, MT_FMT_Q4_K)
MT_MATMUL_KERNELS(q6_K, MT_FMT_Q6_K)

/* ---- activation quantization (kernels/q8.c: ggml's rounding) -----------------------------------
 * Q8_0, grid (ceil(blocks / 128), tokens): one thread per 32-value block: amax, d = amax / 127 as
 * fp16, q = round(x * (127 / amax)). Output row t at y + t * y_stride. */
MT_KERNEL(mt_quant_q8_0)(MT_PARAMS) {
    const int b = int(tgp.x) * MT_TG_THREADS + sg * MT_SIMD + ln, t = int(tgp.y);
    if (b >= p.cols / 32) return;
    device const float *v = (device const float *)mt_xrow(p, x, ix, t) + b * 32;
    device uchar *o = y + ulong(t) * ulong(p.y_stride) + ulong(b) * 34ul;
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        const float a = fabs(v[i]);
        amax = a > amax ? a : amax; /* a NaN never wins, as with fmaxf */
    }
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const uint d = mt_to_half(amax / 127.0f);
    o[0] = uchar(d & 255u);
    o[1] = uchar(d >> 8);
    for (int i = 0; i < 32; i++) o[2 + i] = uchar(mt_round_q8(v[i] * id) & 255);
}

/* Q8_K, grid (ceil(blocks / 4), tokens): one SIMD-group per 256 values, lane l holding 8l..8l+7.
 * The first element of largest magnitude sets iscale = -127 / max; d = 1 / iscale; 16 bsums. */
MT_KERNEL(mt_quant_q8_K)(MT_PARAMS) {
    const int b = int(tgp.x) * MT_SG_PER_TG + sg, t = int(tgp.y);
    if (b >= p.cols / 256) return; /* the whole SIMD-group alike */
    device const float *v = (device const float *)mt_xrow(p, x, ix, t) + b * 256;
    device uchar *o = y + ulong(t) * ulong(p.y_stride) + ulong(b) * 292ul;
    float amax = 0.0f;
    int first = 256;
    for (int i = 8 * ln; i < 8 * ln + 8; i++) {
        const float a = fabs(v[i]);
        if (a > amax) {
            amax = a;
            first = i;
        }
    }
    const float top = simd_max(amax);
    const int at = simd_min(amax == top ? first : 256);
    const float iscale = top != 0.0f ? -127.0f / v[at] : 0.0f;
    int s = 0;
    for (int i = 8 * ln; i < 8 * ln + 8; i++) {
        const int q = top != 0.0f ? mt_round_q8(iscale * v[i]) : 0;
        o[4 + i] = uchar(q & 255);
        s += q;
    }
    s += simd_shuffle_xor(s, ushort(1));
    if ((ln & 1) == 0) {
        o[260 + ln] = uchar(s & 255);
        o[261 + ln] = uchar((s >> 8) & 255);
    }
    if (ln == 0) {
        const uint d = top != 0.0f ? as_type<uint>(1.0f / iscale) : 0u;
        for (int i = 0; i < 4; i++) o[i] = uchar((d >> (8 * i)) & 255u);
    }
}

/* ---- GLU: element i of the gate rows (y, overwritten) with the up rows (x) -------------------- */

MT_KERNEL(mt_glu_swiglu)(MT_PARAMS) {
    const int i = int(tgp.x) * MT_TG_THREADS + sg * MT_SIMD + ln;
    if (i >= p.count) return;
    device float *g = (device float *)y;
    g[i] = mt_swiglu(g[i], ((device const float *)x)[i]);
}

MT_KERNEL(mt_glu_swiglu_oai)(MT_PARAMS) {
    const int i = int(tgp.x) * MT_TG_THREADS + sg * MT_SIMD + ln;
    if (i >= p.count) return;
    device float *g = (device float *)y;
    g[i] = mt_swiglu_oai(g[i], ((device const float *)x)[i], p.alpha, p.limit);
}

MT_KERNEL(mt_glu_situ)(MT_PARAMS) {
    const int i = int(tgp.x) * MT_TG_THREADS + sg * MT_SIMD + ln;
    if (i >= p.count) return;
    device float *g = (device float *)y;
    g[i] = mt_situ(g[i], ((device const float *)x)[i], p.beta, p.lbeta);
}

/* ---- the weighted partial sum (md_moe_accumulate), grid (ceil(cols / 128), rows) ---------------
 * out[row][i] = sum over the row's assignments in their order of weight * y, starting from +0 and
 * rounding the product and the sum separately. ix[x_index + row .. + 1] bound the row's entries
 * at ix[y_index + e] (the output row of x to read) with weights w[e]. */
MT_KERNEL(mt_combine)(MT_PARAMS) {
    const int i = int(tgp.x) * MT_TG_THREADS + sg * MT_SIMD + ln, row = int(tgp.y);
    if (i >= p.cols) return;
    device const float *wt = (device const float *)w;
    float acc = 0.0f;
    for (int e = ix[p.x_index + row]; e < ix[p.x_index + row + 1]; e++) {
        const float yv = ((device const float *)(x + ulong(ix[p.y_index + e]) * ulong(p.x_stride)))[i];
        acc = acc + wt[e] * yv;
    }
    ((device float *)(y + ulong(row) * ulong(p.y_stride)))[i] = acc;
}

/* ---- read bandwidth: every thread sums p.count / threads 16-byte words; p.rows threads --------- */

MT_KERNEL(mt_read_bw)(MT_PARAMS) {
    const int gid = int(tgp.x) * MT_TG_THREADS + sg * MT_SIMD + ln;
    device const uint4 *v = (device const uint4 *)w;
    uint4 s = uint4(0u);
    for (int i = gid; i < p.count; i += p.rows) s += v[i];
    ((device uint *)y)[gid] = s.x ^ s.y ^ s.z ^ s.w;
}
