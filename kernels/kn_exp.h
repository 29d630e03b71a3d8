/* kernels/kn_exp.h — the deterministic exp the kernels' GLU and the model's softmax share, kn_expf,
 * and the tanh built on it (SiTU's), kn_tanhf, with the constants of their steps. Their vector
 * forms (kn_exp_x86.h and kn_simd_avx2.c, and NEON's in kn_simd_neon.c) perform the same correctly
 * rounded operations in the same order, so every ISA and libm gives the same bits: exact mode
 * holds across heterogeneous nodes. */
#ifndef KN_EXP_H
#define KN_EXP_H

/* exp(x) for float x, within about 1 ulp (its steps: kn_glu.c). NaN stays NaN; above KN_EXP_MAX
 * +inf, below KN_EXP_MIN +0. */
float kn_expf(float x);

#define KN_EXP_MAX    88.72283935546875f        /* above: +inf */
#define KN_EXP_MIN    (-103.97208404541015625f) /* below: +0 */
#define KN_EXP_LOG2E  1.44269504088896341f
#define KN_EXP_LN2_HI 0.693145751953125f /* ln 2 in two parts (Cody-Waite) */
#define KN_EXP_LN2_LO 1.428606765330187045e-06f
#define KN_EXP_C7     (1.0f / 5040.0f) /* polynomial coefficients, highest first */
#define KN_EXP_C6     (1.0f / 720.0f)
#define KN_EXP_C5     (1.0f / 120.0f)
#define KN_EXP_C4     (1.0f / 24.0f)
#define KN_EXP_C3     (1.0f / 6.0f)
#define KN_EXP_C2     0.5f

/* tanh(x) for float x, within about 1.5 ulp, built on kn_expf the same way on every ISA: for
 * a = |x| below KN_TANH_SMALL an odd polynomial a + a^3 P(a^2) (Taylor's coefficients, evaluated
 * with fmaf, highest first: near 0, 1 - 2 / (e^2a + 1) would cancel), above 1 - 2 / (e^2a + 1);
 * then x's sign (copysignf). NaN stays NaN. */
float kn_tanhf(float x);

#define KN_TANH_SMALL 0.5f
#define KN_TANH_C15   ((float)(-929569.0 / 638512875.0))
#define KN_TANH_C13   ((float)(21844.0 / 6081075.0))
#define KN_TANH_C11   ((float)(-1382.0 / 155925.0))
#define KN_TANH_C9    ((float)(62.0 / 2835.0))
#define KN_TANH_C7    ((float)(-17.0 / 315.0))
#define KN_TANH_C5    ((float)(2.0 / 15.0))
#define KN_TANH_C3    ((float)(-1.0 / 3.0))

#endif
