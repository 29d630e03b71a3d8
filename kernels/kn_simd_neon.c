/* kernels/kn_simd_neon.c — NEON kernels for arm64 (Mac and Linux nodes), with the dot-product
 * extension (sdot), chosen at run time. Every kernel follows the canonical order of
 * kn_internal.h, so a NEON node returns the same bits as an AVX2 node or the scalar reference:
 *  - float lanes: eight q-registers hold lanes 0..31 (register j = lanes 4j..4j+3); the fold to 8
 *    lanes is (q0+q2)+(q4+q6) and (q1+q3)+(q5+q7), then the 8-lane tree;
 *  - Q8 mode: one exact int32 per block (sdot partials summed with pairwise adds), then
 *    vfmaq_f32 into lanes b % 8 held as two q-registers (lanes 0..3 and 4..7).
 * tests/neon-check.sh cross-builds this file and checks it against the scalar reference under
 * qemu. */
#include "kernels/kn_internal.h"

#include <arm_neon.h>

#include "kernels/kn_exp_neon.h"
#include "util/mw_platform.h"

bool kn__isa_neon_usable(void) {
    return mw_cpu_arm_dotprod();
}

/* ---- canonical reductions -------------------------------------------------------------------- */

/* kn__tree8 of lanes lo = 0..3, hi = 4..7. */
static inline float tree8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t s = vaddq_f32(lo, hi);
    const float32x2_t s2 = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

/* Four int32x4 partial vectors -> their four exact sums, in order. */
static inline int32x4_t sums4(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

/* ---- float lanes ----------------------------------------------------------------------------- */

/* kn__lanes2_fn: elements [k0, k1) of w against nt <= 2 tokens into their 32-lane arrays; eight
 * q-registers per token hold lanes 4j .. 4j+3. */
static void lanes2_neon(const float *w, const float *const *x, int nt, int64_t k0, int64_t k1,
                        int64_t n, float *const *acc) {
    float32x4_t a[2][8];
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < 8; j++) a[t][j] = vld1q_f32(acc[t] + 4 * j);
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32)
        for (int j = 0; j < 8; j++) {
            const float32x4_t wv = vld1q_f32(w + k + 4 * j);
            for (int t = 0; t < nt; t++)
                a[t][j] = vfmaq_f32(a[t][j], wv, vld1q_f32(x[t] + k + 4 * j));
        }
    if (k < k1) { /* the last, partial 32 of the row, zero-padded */
        float wt[32] = {0}, xt[32];
        memcpy(wt, w + k, (size_t)(n - k) * sizeof(float));
        for (int t = 0; t < nt; t++) {
            memset(xt, 0, sizeof xt);
            memcpy(xt, x[t] + k, (size_t)(n - k) * sizeof(float));
            for (int j = 0; j < 8; j++)
                a[t][j] = vfmaq_f32(a[t][j], vld1q_f32(wt + 4 * j), vld1q_f32(xt + 4 * j));
        }
    }
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < 8; j++) vst1q_f32(acc[t] + 4 * j, a[t][j]);
}

/* kn__row_f32_fn: a stored row of n values of `type` as floats (exact: the type's dequantization).
 */
static void row_to_f32(const uint8_t *src, kn_type type, int64_t n, float *dst) {
    int64_t k = 0;
    switch (type) {
    case KN_F16:
        for (; k + 4 <= n; k += 4) {
            uint16_t h[4];
            memcpy(h, src + 2 * k, 8);
            vst1q_f32(dst + k, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))));
        }
        for (; k < n; k++) dst[k] = kn__half_to_float(kn__rd16(src + 2 * k));
        break;
    case KN_BF16:
        for (; k + 4 <= n; k += 4) {
            uint16_t h[4];
            memcpy(h, src + 2 * k, 8);
            vst1q_f32(dst + k, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h), 16)));
        }
        for (; k < n; k++) dst[k] = kn_bf16_to_f32(kn__rd16(src + 2 * k));
        break;
    default:
        kn_traits(type)->to_float(src, dst, n);
        break;
    }
}

KN__ROWS_FLOAT(rows_float, row_to_f32, lanes2_neon)

/* ---- Q8_0 activations ------------------------------------------------------------------------ */

static int64_t groups8(int64_t nb) {
    return (nb + 7) / 8;
}

/* A prepared row: qs[nb][32] in natural order, then float d_x[8 * groups] (zero padded). */
static size_t q8_0n_bytes(int64_t k) {
    const int64_t nb = k / KN__QK32;
    return (size_t)nb * KN__QK32 + (size_t)groups8(nb) * 8 * sizeof(float);
}

static void prep_q8_0n(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / KN__QK32;
    int8_t *qs = dst;
    float *dx = (float *)(qs + nb * KN__QK32);
    for (int64_t b = 0; b < nb; b++) {
        kn__block_q8_0 blk;
        kn__quant_q8_0_block(x + b * KN__QK32, &blk);
        memcpy(qs + b * KN__QK32, blk.qs, KN__QK32);
        dx[b] = kn__half_to_float(blk.d);
    }
    for (int64_t b = nb; b < groups8(nb) * 8; b++) dx[b] = 0.0f;
}

static size_t q8_K_bytes(int64_t k) {
    return (size_t)(k / KN__QK_K) * KN__Q8_K_BYTES;
}

/* ---- MXFP4 and Q8_0 weights ------------------------------------------------------------------ */

/* Decoded rows: int8 weights (MXFP4 kvalues, or Q8_0 weights) [8 * groups][32], then float
 * per-block weight scales (h(e), or d_w) [8 * groups], padding zero. */
static size_t dec32_bytes(int64_t k) {
    const int64_t ng = groups8(k / KN__QK32);
    return (size_t)ng * 8 * (KN__QK32 + sizeof(float));
}

static void decode_mxfp4(const uint8_t *row, int64_t k, void *dst) {
    const int64_t nb = k / KN__QK32, ng = groups8(nb);
    int8_t *w = dst;
    float *sw = (float *)(w + ng * 8 * KN__QK32);
    const int8x16_t kv = vld1q_s8(kn__mxfp4_kvalues);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    memset(w, 0, (size_t)ng * 8 * KN__QK32);
    for (int64_t b = 0; b < ng * 8; b++) sw[b] = 0.0f;
    for (int64_t b = 0; b < nb; b++, row += KN__MXFP4_BYTES) {
        const uint8x16_t q = vld1q_u8(row + 1);
        vst1q_s8(w + KN__QK32 * b, vqtbl1q_s8(kv, vandq_u8(q, m4)));
        vst1q_s8(w + KN__QK32 * b + 16, vqtbl1q_s8(kv, vshrq_n_u8(q, 4)));
        sw[b] = kn__e8m0_half(row[0]);
    }
}

static void decode_q8_0(const uint8_t *row, int64_t k, void *dst) {
    const int64_t nb = k / KN__QK32, ng = groups8(nb);
    int8_t *w = dst;
    float *sw = (float *)(w + ng * 8 * KN__QK32);
    memset(w, 0, (size_t)ng * 8 * KN__QK32);
    for (int64_t b = 0; b < ng * 8; b++) sw[b] = 0.0f;
    for (int64_t b = 0; b < nb; b++, row += KN__Q8_0_BYTES) {
        memcpy(w + KN__QK32 * b, row + 2, KN__QK32);
        sw[b] = kn__half_to_float(kn__rd16(row));
    }
}

static inline int32x4_t block_dot(const int8_t *w, const int8_t *x) {
    const int32x4_t p = vdotq_s32(vdupq_n_s32(0), vld1q_s8(w), vld1q_s8(x));
    return vdotq_s32(p, vld1q_s8(w + 16), vld1q_s8(x + 16));
}

/* A decoded row against one prepared token: 8 blocks per step, sums in lanes b % 8. Blocks past
 * the token's end read zero activations (qs is padded by the zero weights) with zero scales. */
static float dot_dec32(const int8_t *w, const uint8_t *xp, int64_t nb) {
    const int64_t ng = groups8(nb);
    const int8_t *xq = (const int8_t *)xp;
    const float *dx = (const float *)(xq + nb * KN__QK32);
    const float *sw = (const float *)(w + ng * 8 * KN__QK32);
    static const int8_t zero[KN__QK32] = {0};
    float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
    for (int64_t g = 0; g < ng; g++) {
        int32x4_t p[8];
        for (int j = 0; j < 8; j++) {
            const int64_t b = 8 * g + j;
            p[j] = block_dot(w + KN__QK32 * b, b < nb ? xq + KN__QK32 * b : zero);
        }
        const int32x4_t s_lo = sums4(p[0], p[1], p[2], p[3]), s_hi = sums4(p[4], p[5], p[6], p[7]);
        const float32x4_t sc_lo = vmulq_f32(vld1q_f32(dx + 8 * g), vld1q_f32(sw + 8 * g));
        const float32x4_t sc_hi = vmulq_f32(vld1q_f32(dx + 8 * g + 4), vld1q_f32(sw + 8 * g + 4));
        lo = vfmaq_f32(lo, vcvtq_f32_s32(s_lo), sc_lo);
        hi = vfmaq_f32(hi, vcvtq_f32_s32(s_hi), sc_hi);
    }
    return tree8(lo, hi);
}

/* Each row decoded once into scratch, then against every token. */
static void rows_dec32(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                       int64_t n1, void *scratch) {
    const int64_t nb = W->cols / KN__QK32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *src = (const uint8_t *)W->data + (size_t)n * W->row_bytes;
        if (W->type == KN_MXFP4)
            decode_mxfp4(src, W->cols, scratch);
        else
            decode_q8_0(src, W->cols, scratch);
        for (int64_t t = 0; t < x->T; t++)
            Y[t * ldy + n] =
                dot_dec32(scratch, (const uint8_t *)x->data + (size_t)t * x->stride, nb);
    }
}

static size_t scratch_dec32(const kn_mat *W, int64_t T) {
    (void)T;
    return dec32_bytes(W->cols);
}

/* ---- K-quants -------------------------------------------------------------------------------- */

/* Q6_K x Q8_K: each 16-code group's sdot partials times its scale, accumulated exactly. */
static float dot_q6_K(const uint8_t *w, const kn__block_q8_K *x, int64_t nb) {
    float lane[KN__QLANES] = {0};
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
    const int8x16_t m32 = vdupq_n_s8(32);
    for (int64_t b = 0; b < nb; b++, w += KN__Q6_K_BYTES, x++) {
        const int8_t *sc = (const int8_t *)(w + 192);
        int32x4_t acc = vdupq_n_s32(0);
        for (int n = 0; n < 2; n++)
            for (int h = 0; h < 32; h += 16) {
                const uint8x16_t a = vld1q_u8(w + 64 * n + h), c = vld1q_u8(w + 64 * n + 32 + h);
                const uint8x16_t qh = vld1q_u8(w + 128 + 32 * n + h);
                const uint8x16_t code[4] = {
                    vorrq_u8(vandq_u8(a, m4), vshlq_n_u8(vandq_u8(qh, m3), 4)),
                    vorrq_u8(vandq_u8(c, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), m3), 4)),
                    vorrq_u8(vshrq_n_u8(a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), m3), 4)),
                    vorrq_u8(vshrq_n_u8(c, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4))};
                for (int q = 0; q < 4; q++) {
                    const int e = 128 * n + 32 * q + h; /* first element of this 16-group */
                    const int8x16_t v = vsubq_s8(vreinterpretq_s8_u8(code[q]), m32);
                    const int32x4_t p = vdotq_s32(vdupq_n_s32(0), v, vld1q_s8(x->qs + e));
                    acc = vmlaq_n_s32(acc, p, sc[e / 16]);
                }
            }
        const float scale = kn__half_to_float(kn__rd16(w + 208)) * x->d;
        lane[b % KN__QLANES] = fmaf((float)vaddvq_s32(acc), scale, lane[b % KN__QLANES]);
    }
    return kn__tree8(lane);
}

/* Q4_K x Q8_K: scaled code sums and mins as two exact sums, two fmas into the block's lane. */
static float dot_q4_K(const uint8_t *w, const kn__block_q8_K *x, int64_t nb) {
    float lane[KN__QLANES] = {0};
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t b = 0; b < nb; b++, w += KN__Q4_K_BYTES, x++) {
        int32x4_t acc = vdupq_n_s32(0);
        int32_t msum = 0;
        for (int j = 0; j < 4; j++) {
            uint8_t sc_lo, m_lo, sc_hi, m_hi;
            kn__q4k_scale_min(2 * j, w + 4, &sc_lo, &m_lo);
            kn__q4k_scale_min(2 * j + 1, w + 4, &sc_hi, &m_hi);
            for (int h = 0; h < 32; h += 16) {
                const uint8x16_t q = vld1q_u8(w + 16 + 32 * j + h);
                const int32x4_t pl = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q, m4)),
                                               vld1q_s8(x->qs + 64 * j + h));
                const int32x4_t ph =
                    vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(q, 4)),
                              vld1q_s8(x->qs + 64 * j + 32 + h));
                acc = vmlaq_n_s32(vmlaq_n_s32(acc, pl, sc_lo), ph, sc_hi);
            }
            msum += m_lo * (x->bsums[4 * j] + x->bsums[4 * j + 1]) +
                    m_hi * (x->bsums[4 * j + 2] + x->bsums[4 * j + 3]);
        }
        const float dd = kn__half_to_float(kn__rd16(w)) * x->d;
        const float dm = kn__half_to_float(kn__rd16(w + 2)) * x->d;
        float *l = &lane[b % KN__QLANES];
        *l = fmaf((float)vaddvq_s32(acc), dd, *l);
        *l = fmaf((float)msum, -dm, *l);
    }
    return kn__tree8(lane);
}

typedef float (*kquant_dot)(const uint8_t *w, const kn__block_q8_K *x, int64_t nb);

static void rows_kquant(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                        int64_t n1, kquant_dot dot) {
    for (int64_t n = n0; n < n1; n++)
        for (int64_t t = 0; t < x->T; t++)
            Y[t * ldy + n] =
                dot((const uint8_t *)W->data + (size_t)n * W->row_bytes,
                    (const kn__block_q8_K *)((const uint8_t *)x->data + (size_t)t * x->stride),
                    W->cols / KN__QK_K);
}

static void rows_q6_K(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    (void)scratch;
    rows_kquant(W, x, Y, ldy, n0, n1, dot_q6_K);
}

static void rows_q4_K(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    (void)scratch;
    rows_kquant(W, x, Y, ldy, n0, n1, dot_q4_K);
}

/* ---- GLU: kn_expf, kn_tanhf and the policies of kn_glu.c, 4 values at a time, the same steps */

static inline float32x4_t blend(uint32x4_t m, float32x4_t yes, float32x4_t no) {
    return vbslq_f32(m, yes, no);
}

/* kn_tanhf: both branches computed, the scalar one's selected. */
static inline float32x4_t tanh_neon(float32x4_t x) {
    const float32x4_t a = vabsq_f32(x), a2 = vmulq_f32(a, a);
    float32x4_t p = vdupq_n_f32(KN_TANH_C15);
    p = vfmaq_f32(vdupq_n_f32(KN_TANH_C13), p, a2);
    p = vfmaq_f32(vdupq_n_f32(KN_TANH_C11), p, a2);
    p = vfmaq_f32(vdupq_n_f32(KN_TANH_C9), p, a2);
    p = vfmaq_f32(vdupq_n_f32(KN_TANH_C7), p, a2);
    p = vfmaq_f32(vdupq_n_f32(KN_TANH_C5), p, a2);
    p = vfmaq_f32(vdupq_n_f32(KN_TANH_C3), p, a2);
    const float32x4_t small = vfmaq_f32(a, vmulq_f32(a2, a), p);
    const float32x4_t e = kn_neon_exp4(vaddq_f32(a, a));
    const float32x4_t big =
        vsubq_f32(vdupq_n_f32(1.0f), vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, vdupq_n_f32(1.0f))));
    const float32x4_t r = blend(vcltq_f32(a, vdupq_n_f32(KN_TANH_SMALL)), small, big);
    return vbslq_f32(vdupq_n_u32(0x80000000u), x, r); /* copysignf(r, x) */
}

static inline float32x4_t silu4(float32x4_t g, float32x4_t u, const kn_glu *glu) {
    (void)glu;
    return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), kn_neon_exp4(vnegq_f32(g)))), u);
}

static inline float32x4_t swiglu_oai4(float32x4_t g, float32x4_t u, const kn_glu *glu) {
    const float32x4_t one = vdupq_n_f32(1.0f), lim = vdupq_n_f32(glu->limit),
                      nlim = vdupq_n_f32(-glu->limit), alpha = vdupq_n_f32(glu->alpha);
    g = blend(vcgtq_f32(g, lim), lim, g);
    const uint32x4_t below = vcltq_f32(u, nlim);
    u = blend(vcgtq_f32(u, lim), lim, u);
    u = blend(below, nlim, u);
    const float32x4_t ex = kn_neon_exp4(vnegq_f32(vmulq_f32(alpha, g)));
    return vmulq_f32(vdivq_f32(g, vaddq_f32(one, ex)), vaddq_f32(u, one));
}

static inline float32x4_t situ4(float32x4_t g, float32x4_t u, const kn_glu *glu) {
    const float32x4_t beta = vdupq_n_f32(glu->beta), lbeta = vdupq_n_f32(glu->lbeta);
    const float32x4_t gate = vdivq_f32(vmulq_f32(beta, tanh_neon(vdivq_f32(g, beta))),
                                       vaddq_f32(vdupq_n_f32(1.0f), kn_neon_exp4(vnegq_f32(g))));
    if (glu->lbeta > 0.0f) u = vmulq_f32(lbeta, tanh_neon(vdivq_f32(u, lbeta)));
    return vmulq_f32(gate, u);
}

/* One loop per kind, so each body is inlined into its own loop. */
#define GLU4_LOOP(name, body)                                                                      \
    static void name(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n4) {  \
        for (int64_t i = 0; i < n4; i += 4)                                                        \
            vst1q_f32(out + i, body(vld1q_f32(g + i), vld1q_f32(u + i), glu));                     \
    }
GLU4_LOOP(silu_rows, silu4)
GLU4_LOOP(swiglu_oai_rows, swiglu_oai4)
GLU4_LOOP(situ_rows, situ4)

static void (*const glu_rows[KN_GLU_COUNT])(const kn_glu *, const float *, const float *, float *,
                                            int64_t) = {
    [KN_GLU_SWIGLU] = silu_rows, [KN_GLU_SWIGLU_OAI] = swiglu_oai_rows, [KN_GLU_SITU] = situ_rows};

void kn__glu_apply_neon(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    const int64_t n4 = n / 4 * 4;
    glu_rows[glu->kind](glu, g, u, out, n4);
    kn__glu_apply_ref(glu, g + n4, u + n4, out + n4, n - n4);
}

/* ---- the NEON kernel table ------------------------------------------------------------------- */

KN__FLOAT_KERNELS(neon, kn__scratch_float, rows_float, kn__prep_round_f16);
static const kn__kernel k_mxfp4 = {"neon-mxfp4-q8_0", q8_0n_bytes, prep_q8_0n, scratch_dec32,
                                   rows_dec32};
static const kn__kernel k_q8_0 = {"neon-q8_0-q8_0", q8_0n_bytes, prep_q8_0n, scratch_dec32,
                                  rows_dec32};
static const kn__kernel k_q6_K = {"neon-q6_K-q8_K", q8_K_bytes, kn__quant_q8_K, NULL, rows_q6_K};
static const kn__kernel k_q4_K = {"neon-q4_K-q8_K", q8_K_bytes, kn__quant_q8_K, NULL, rows_q4_K};

static const kn__kernel *const q8_kernels[KN_TYPE_COUNT] = {
    KN__ROUNDED_ROWS(neon), /* F16, BF16 */
    [KN_MXFP4] = &k_mxfp4,  [KN_Q8_0] = &k_q8_0, [KN_Q6_K] = &k_q6_K, [KN_Q4_K] = &k_q4_K,
};

const kn__kernel *kn__kernel_neon(kn_type t, kn_numerics num) {
    return kn__kernel_pick(q8_kernels, &neon_float, t, num);
}
