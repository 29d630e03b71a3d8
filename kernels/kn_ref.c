/* kernels/kn_ref.c — the portable scalar reference: every dot product written out in the canonical
 * order (kn_internal.h), plainly enough to be read as the definition. The SIMD paths are tested
 * bit for bit against these functions. */
#include "kernels/kn_internal.h"

float kn__dot_f32_ref(const float *w, const float *x, int64_t n) {
    float acc[KN__FLANES] = {0};
    for (int64_t k0 = 0; k0 < n; k0 += KN__FLANES) /* element k0 + i into lane i */
        for (int64_t i = 0; i < KN__FLANES && k0 + i < n; i++)
            acc[i] = fmaf(w[k0 + i], x[k0 + i], acc[i]);
    return kn__tree32(acc);
}

/* ---- Q8-mode block dots: exact integer sum per block, then one fma into lane b % 8 ----------- */

static float dot_mxfp4_q8_0(const uint8_t *w, const void *xv, int64_t nb) {
    const kn__block_q8_0 *x = xv;
    float acc[KN__QLANES] = {0};
    for (int64_t b = 0; b < nb; b++, w += KN__MXFP4_BYTES) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += kn__mxfp4_kvalues[w[1 + j] & 0xF] * x[b].qs[j] +
                    kn__mxfp4_kvalues[w[1 + j] >> 4] * x[b].qs[j + 16];
        const float scale = kn__half_to_float(x[b].d) * kn__e8m0_half(w[0]);
        acc[b % KN__QLANES] = fmaf((float)isum, scale, acc[b % KN__QLANES]);
    }
    return kn__tree8(acc);
}

static float dot_q8_0_q8_0(const uint8_t *w, const void *xv, int64_t nb) {
    const kn__block_q8_0 *x = xv;
    float acc[KN__QLANES] = {0};
    for (int64_t b = 0; b < nb; b++, w += KN__Q8_0_BYTES) {
        int32_t isum = 0;
        for (int j = 0; j < KN__QK32; j++) isum += (int8_t)w[2 + j] * x[b].qs[j];
        const float scale = kn__half_to_float(kn__rd16(w)) * kn__half_to_float(x[b].d);
        acc[b % KN__QLANES] = fmaf((float)isum, scale, acc[b % KN__QLANES]);
    }
    return kn__tree8(acc);
}

/* The whole super-block, group scales included, is one exact int32 (|isum| < 2^28). */
static float dot_q6_K_q8_K(const uint8_t *w, const void *xv, int64_t nb) {
    const kn__block_q8_K *x = xv;
    float acc[KN__QLANES] = {0};
    for (int64_t b = 0; b < nb; b++, w += KN__Q6_K_BYTES) {
        const int8_t *sc = (const int8_t *)(w + 192);
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) {
            int32_t gsum = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++)
                gsum += (kn__q6k_code(w, i) - 32) * x[b].qs[i];
            isum += sc[g] * gsum;
        }
        const float scale = kn__half_to_float(kn__rd16(w + 208)) * x[b].d;
        acc[b % KN__QLANES] = fmaf((float)isum, scale, acc[b % KN__QLANES]);
    }
    return kn__tree8(acc);
}

/* Two exact sums per super-block: the scaled codes and the mins against the block sums. The min
 * term is a second fma into the same lane, after the first. */
static float dot_q4_K_q8_K(const uint8_t *w, const void *xv, int64_t nb) {
    const kn__block_q8_K *x = xv;
    float acc[KN__QLANES] = {0};
    for (int64_t b = 0; b < nb; b++, w += KN__Q4_K_BYTES) {
        const uint8_t *scales = w + 4, *q = w + 16;
        int32_t isum = 0, msum = 0;
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            kn__q4k_scale_min(g, scales, &sc, &m);
            int32_t gsum = 0;
            for (int l = 0; l < 32; l++) {
                const uint8_t byte = q[32 * (g / 2) + l];
                gsum += ((g & 1) ? byte >> 4 : byte & 0xF) * x[b].qs[32 * g + l];
            }
            isum += sc * gsum;
            msum += m * (x[b].bsums[2 * g] + x[b].bsums[2 * g + 1]);
        }
        const float dx = x[b].d;
        const float dd = kn__half_to_float(kn__rd16(w)) * dx;
        const float dm = kn__half_to_float(kn__rd16(w + 2)) * dx;
        acc[b % KN__QLANES] = fmaf((float)isum, dd, acc[b % KN__QLANES]);
        acc[b % KN__QLANES] = fmaf((float)msum, -dm, acc[b % KN__QLANES]);
    }
    return kn__tree8(acc);
}

/* ---- activation preparation ------------------------------------------------------------------ */

static size_t q8_0_bytes(int64_t k) {
    return (size_t)(k / KN__QK32) * KN__Q8_0_BYTES;
}
static size_t q8_K_bytes(int64_t k) {
    return (size_t)(k / KN__QK_K) * KN__Q8_K_BYTES;
}
size_t kn__f32_bytes(int64_t k) {
    return (size_t)k * sizeof(float);
}

/* F16 / BF16 weights in Q8 mode see activations rounded to their own format, as ggml does. */
void kn__prep_round_f16(const float *x, void *dst, int64_t k) {
    float *y = dst;
    for (int64_t i = 0; i < k; i++) y[i] = kn__half_to_float(kn_f32_to_fp16(x[i]));
}
void kn__prep_round_bf16(const float *x, void *dst, int64_t k) {
    float *y = dst;
    for (int64_t i = 0; i < k; i++) y[i] = kn_bf16_to_f32(kn_f32_to_bf16(x[i]));
}

/* ---- row loops ------------------------------------------------------------------------------- */

typedef float (*block_dot_fn)(const uint8_t *w, const void *x, int64_t nb);

static void rows_blocks(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                        int64_t n1, block_dot_fn dot) {
    const int64_t nb = W->cols / kn_traits(W->type)->blck_size;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *w = (const uint8_t *)W->data + (size_t)n * W->row_bytes;
        for (int64_t t = 0; t < x->T; t++)
            Y[t * ldy + n] = dot(w, (const uint8_t *)x->data + (size_t)t * x->stride, nb);
    }
}

#define BLOCK_ROWS(fn, dot)                                                                        \
    static void fn(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,           \
                   int64_t n1, void *scratch) {                                                    \
        (void)scratch;                                                                             \
        rows_blocks(W, x, Y, ldy, n0, n1, dot);                                                    \
    }
BLOCK_ROWS(rows_mxfp4_q8, dot_mxfp4_q8_0)
BLOCK_ROWS(rows_q8_0_q8, dot_q8_0_q8_0)
BLOCK_ROWS(rows_q6_K_q8, dot_q6_K_q8_K)
BLOCK_ROWS(rows_q4_K_q8, dot_q4_K_q8_K)

static size_t float_row_scratch(const kn_mat *W, int64_t T) {
    (void)T;
    return (size_t)W->cols * sizeof(float);
}

/* Float lanes against dequantized weights: each row is dequantized once into scratch, then
 * dotted with every token. */
static void rows_float(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                       int64_t n1, void *scratch) {
    const kn_type_traits *tr = kn_traits(W->type);
    float *wf = scratch;
    for (int64_t n = n0; n < n1; n++) {
        tr->to_float((const uint8_t *)W->data + (size_t)n * W->row_bytes, wf, W->cols);
        for (int64_t t = 0; t < x->T; t++) {
            const float *xt = (const float *)((const uint8_t *)x->data + (size_t)t * x->stride);
            Y[t * ldy + n] = kn__dot_f32_ref(wf, xt, W->cols);
        }
    }
}

/* ---- the scalar kernel table ----------------------------------------------------------------- */

KN__FLOAT_KERNELS(ref, float_row_scratch, rows_float, kn__prep_round_f16);
static const kn__kernel k_mxfp4_q8 = {"ref-mxfp4-q8_0", q8_0_bytes, kn__quant_q8_0, NULL,
                                      rows_mxfp4_q8};
static const kn__kernel k_q8_0_q8 = {"ref-q8_0-q8_0", q8_0_bytes, kn__quant_q8_0, NULL,
                                     rows_q8_0_q8};
static const kn__kernel k_q6_K_q8 = {"ref-q6_K-q8_K", q8_K_bytes, kn__quant_q8_K, NULL,
                                     rows_q6_K_q8};
static const kn__kernel k_q4_K_q8 = {"ref-q4_K-q8_K", q8_K_bytes, kn__quant_q8_K, NULL,
                                     rows_q4_K_q8};

/* Q8-mode kernels by weight type; other computable types use float lanes in both modes (F32 and
 * Q8_K weights take float activations). */
static const kn__kernel *const q8_kernels[KN_TYPE_COUNT] = {
    KN__ROUNDED_ROWS(ref), /* F16, BF16 */
    [KN_MXFP4] = &k_mxfp4_q8, [KN_Q8_0] = &k_q8_0_q8,
    [KN_Q6_K] = &k_q6_K_q8,   [KN_Q4_K] = &k_q4_K_q8,
};

const kn__kernel *kn__kernel_scalar(kn_type t, kn_numerics num) {
    return kn__kernel_pick(q8_kernels, &ref_float, t, num);
}

#define KN_FLOAT_ROWS  4    /* rows per tile */
#define KN_FLOAT_CHUNK 1024 /* elements of K per pass: 4 KiB of each row and token */

static size_t float_rows_bytes(const kn_mat *W) {
    return W->type == KN_F32 ? 0 : kn__align64((size_t)(KN_FLOAT_ROWS * W->cols) * sizeof(float));
}

void kn__rows_float(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                    int64_t n1, void *scratch, kn__row_f32_fn to_f32, kn__lanes2_fn lanes2) {
    const int64_t K = W->cols, T = x->T;
    float *conv = scratch, *acc = (float *)((uint8_t *)scratch + float_rows_bytes(W));
    for (int64_t r0 = n0; r0 < n1; r0 += KN_FLOAT_ROWS) {
        const int rn = n1 - r0 < KN_FLOAT_ROWS ? (int)(n1 - r0) : KN_FLOAT_ROWS;
        const float *w[KN_FLOAT_ROWS];
        for (int r = 0; r < rn; r++) {
            const uint8_t *row = (const uint8_t *)W->data + (size_t)(r0 + r) * W->row_bytes;
            if (W->type == KN_F32) { /* read in place: SIMD loads need no alignment */
                w[r] = (const float *)row;
            } else {
                to_f32(row, W->type, K, conv + r * K);
                w[r] = conv + r * K;
            }
        }
        memset(acc, 0, (size_t)(rn * T * KN__FLANES) * sizeof(float));
        for (int64_t k0 = 0; k0 < K; k0 += KN_FLOAT_CHUNK) {
            const int64_t k1 = k0 + KN_FLOAT_CHUNK < K ? k0 + KN_FLOAT_CHUNK : K;
            for (int64_t t = 0; t < T; t += 2) {
                const int nt = T - t >= 2 ? 2 : 1;
                const float *xs[2] = {
                    (const float *)((const uint8_t *)x->data + (size_t)t * x->stride),
                    (const float *)((const uint8_t *)x->data + (size_t)(t + nt - 1) * x->stride)};
                for (int r = 0; r < rn; r++) {
                    float *a[2] = {acc + (r * T + t) * KN__FLANES,
                                   acc + (r * T + t + nt - 1) * KN__FLANES};
                    lanes2(w[r], xs, nt, k0, k1, K, a);
                }
            }
        }
        for (int r = 0; r < rn; r++)
            for (int64_t t = 0; t < T; t++)
                Y[t * ldy + r0 + r] = kn__tree32(acc + (r * T + t) * KN__FLANES);
    }
}

size_t kn__scratch_float(const kn_mat *W, int64_t T) {
    return float_rows_bytes(W) + (size_t)(KN_FLOAT_ROWS * T * KN__FLANES) * sizeof(float);
}
