/* kernels/kn_exp_neon.h — kn_expf on four NEON lanes: its correctly rounded steps (vfmaq_f32, as
 * fmaf) in its order, 2^n in at most two exact steps, then its special cases (inf above, 0 below,
 * NaN kept), so every lane equals kn_expf. One definition for the kernels' GLU (kn_simd_neon.c)
 * and the model's softmax (model/md_ops_neon.c); include only from files built for aarch64. */
#ifndef KN_EXP_NEON_H
#define KN_EXP_NEON_H

#include <arm_neon.h>
#include <math.h>

#include "kernels/kn_exp.h"

static inline float32x4_t kn_neon_exp4(float32x4_t x) {
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(KN_EXP_LOG2E)));
    float32x4_t r = vfmaq_f32(x, n, vdupq_n_f32(-KN_EXP_LN2_HI));
    r = vfmaq_f32(r, n, vdupq_n_f32(-KN_EXP_LN2_LO));
    float32x4_t p = vdupq_n_f32(KN_EXP_C7);
    p = vfmaq_f32(vdupq_n_f32(KN_EXP_C6), p, r);
    p = vfmaq_f32(vdupq_n_f32(KN_EXP_C5), p, r);
    p = vfmaq_f32(vdupq_n_f32(KN_EXP_C4), p, r);
    p = vfmaq_f32(vdupq_n_f32(KN_EXP_C3), p, r);
    p = vfmaq_f32(vdupq_n_f32(KN_EXP_C2), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t e = vcvtq_s32_f32(n); /* n is integral (or the lane is overridden below) */
    const uint32x4_t big = vcgtq_s32(e, vdupq_n_s32(127)), tiny = vcltq_s32(e, vdupq_n_s32(-126));
    float32x4_t first =
        vbslq_f32(tiny, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(253)), 23)),
                  vdupq_n_f32(1.0f));
    first = vbslq_f32(big, vdupq_n_f32(0x1p127f), first);
    e = vbslq_s32(big, vsubq_s32(e, vdupq_n_s32(127)), e);
    e = vbslq_s32(tiny, vdupq_n_s32(-126), e);
    float32x4_t y =
        vmulq_f32(vmulq_f32(p, first),
                  vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23)));
    y = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(KN_EXP_MAX)), vdupq_n_f32(INFINITY), y);
    y = vbslq_f32(vcltq_f32(x, vdupq_n_f32(KN_EXP_MIN)), vdupq_n_f32(0.0f), y);
    return vbslq_f32(vceqq_f32(x, x), y, x); /* NaN in, the same NaN out */
}

#endif
