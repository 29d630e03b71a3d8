/* kernels/kn_simd_neon.c — NEON kernels for arm64 (Mac and Linux nodes), with the dot-product
 * extension (sdot), chosen at run time. Every kernel follows the canonical order of
 * kn_internal.h, so a NEON node returns the same bits as an AVX2 node or the scalar reference:
 *  - float lanes: eight q-registers hold lanes 0..31 (register j = lanes 4j..4j+3); the fold to 8
 *    lanes is (q0+q2)+(q4+q6) and (q1+q3)+(q5+q7), then the 8-lane tree;
 *  - Q8 mode: one exact int32 per block (sdot partials summed with pairwise adds), then
 *    vfmaq_f32 into lanes b % 8 held as two q-registers (lanes 0..3 and 4..7); the block kernels,
 *    which stream each stored row once per pass of tokens, are in kn_simd_neon_stream.h.
 * tests/neon-check.sh cross-builds this file and checks it against the scalar reference under
 * qemu. */
#include "kernels/kn_internal.h"

#include <arm_neon.h>

#include "kernels/kn_exp_neon.h"
#include "kernels/kn_simd_neon_stream.h"
#include "util/mw_platform.h"

bool kn__isa_neon_usable(void) {
    return mw_cpu_arm_dotprod();
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

/* ---- Q8-mode block kernels (kn_simd_neon_stream.h) ------------------------------------------ */

/* One entry for the four types: each case inlines the kernel for its type. */
static void rows_blocks(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                        int64_t n1, void *scratch) {
    (void)scratch;
    switch (W->type) {
    case KN_MXFP4:
        kn__neon_rows(W, x, Y, ldy, n0, n1, KN_MXFP4);
        break;
    case KN_Q8_0:
        kn__neon_rows(W, x, Y, ldy, n0, n1, KN_Q8_0);
        break;
    case KN_Q6_K:
        kn__neon_rows(W, x, Y, ldy, n0, n1, KN_Q6_K);
        break;
    default:
        kn__neon_rows(W, x, Y, ldy, n0, n1, KN_Q4_K);
        break; /* the table's last type */
    }
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
static const kn__kernel k_mxfp4 = {"neon-mxfp4-q8_0", kn__neon_q8_0n_bytes, kn__neon_prep_q8_0n,
                                   NULL, rows_blocks};
static const kn__kernel k_q8_0 = {"neon-q8_0-q8_0", kn__neon_q8_0n_bytes, kn__neon_prep_q8_0n, NULL,
                                  rows_blocks};
static const kn__kernel k_q6_K = {"neon-q6_K-q8_K", kn__neon_q8_Kn_bytes, kn__neon_prep_q8_Kn, NULL,
                                  rows_blocks};
static const kn__kernel k_q4_K = {"neon-q4_K-q8_K", kn__neon_q8_Kn_bytes, kn__neon_prep_q8_Kn, NULL,
                                  rows_blocks};

static const kn__kernel *const q8_kernels[KN_TYPE_COUNT] = {
    KN__ROUNDED_ROWS(neon), /* F16, BF16 */
    [KN_MXFP4] = &k_mxfp4,  [KN_Q8_0] = &k_q8_0, [KN_Q6_K] = &k_q6_K, [KN_Q4_K] = &k_q4_K,
};

const kn__kernel *kn__kernel_neon(kn_type t, kn_numerics num) {
    return kn__kernel_pick(q8_kernels, &neon_float, t, num);
}
