/* kernels/kn_mxfp4_ct.c — MXFP4 in compressed-tensors' planar layout (KN_MXFP4_CT, "mxfp4_ct"), so
 * that a checkpoint's `weight_packed` and `weight_scale` bytes serve as they are stored: a matrix
 * is its packed plane (rows × cols/2 bytes, byte k of a row holding element 2k in its low nibble
 * and 2k+1 in its high one) followed by its scale plane (rows × cols/32 E8M0 bytes, one per 32
 * columns). The values are MXFP4's (the same e2m1 codes and exponents as block_mxfp4). A matrix is
 * one whole: row r's codes and scale bytes are found from the matrix's rows, so a view of some of
 * its rows is not a matrix of this type.
 *
 * The kernels convert a tile of rows into block_mxfp4 in a per-thread buffer (the weights are
 * read from memory once; the conversion stays in cache) and run the MXFP4 kernel of the same ISA
 * and numerics on it: every ISA's MXFP4 rows serve this layout too, and the results are those of
 * the block_mxfp4 twin bit for bit. */
#include "kernels/kn_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define CT_TILE 16 /* rows converted at a time */

/* One 32-element group: planar codes q[16] (elements 2k, 2k+1 in byte k) and its scale byte →
 * block_mxfp4 (the scale, then element j in the low nibble of qs[j] and j + 16 in the high). */
static void to_block(uint8_t scale, const uint8_t q[16], uint8_t out[KN__MXFP4_BYTES]) {
    out[0] = scale;
    for (int k = 0; k < 8; k++) {
        const uint8_t a = q[k], b = q[8 + k]; /* elements 2k, 2k+1 and 2k+16, 2k+17 */
        out[1 + 2 * k] = (uint8_t)((a & 15) | (b & 15) << 4);
        out[2 + 2 * k] = (uint8_t)((a >> 4) | (b & 0xF0));
    }
}

/* The inverse. */
static void from_block(const uint8_t blk[KN__MXFP4_BYTES], uint8_t *scale, uint8_t q[16]) {
    *scale = blk[0];
    for (int k = 0; k < 8; k++) {
        const uint8_t lo = blk[1 + 2 * k], hi = blk[2 + 2 * k]; /* elements 2k and 2k + 1 */
        q[k] = (uint8_t)((lo & 15) | (hi & 15) << 4);
        q[8 + k] = (uint8_t)((lo >> 4) | (hi & 0xF0));
    }
}

void kn_mxfp4_ct_rows_to_blocks(const kn_mat *W, int64_t r0, int64_t n, void *dst) {
    const int64_t groups = W->cols / KN__QK32;
    const uint8_t *codes = W->data, *scales = codes + (size_t)(W->rows * W->cols / 2);
    uint8_t *out = dst;
    for (int64_t r = r0; r < r0 + n; r++) {
        const uint8_t *q = codes + (size_t)(r * W->cols / 2), *e = scales + (size_t)(r * groups);
        for (int64_t g = 0; g < groups; g++, out += KN__MXFP4_BYTES)
            to_block(e[g], q + 16 * g, out);
    }
}

void kn_mxfp4_ct_from_blocks(const void *blocks, int64_t rows, int64_t cols, void *dst) {
    const int64_t groups = cols / KN__QK32;
    const uint8_t *b = blocks;
    uint8_t *codes = dst, *scales = codes + (size_t)(rows * cols / 2);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < groups; g++, b += KN__MXFP4_BYTES)
            from_block(b, scales + r * groups + g, codes + (size_t)(r * cols / 2) + 16 * g);
}

/* ---- traits: one row of k elements (a one-row matrix: its codes, then its scales) ----------- */

void kn__dequant_mxfp4_ct(const void *src, float *dst, int64_t k) {
    const uint8_t *q = src, *e = q + k / 2;
    for (int64_t g = 0; g < k / KN__QK32; g++, q += 16, dst += KN__QK32) {
        const float h = kn__e8m0_half(e[g]);
        for (int j = 0; j < 16; j++) {
            dst[2 * j] = (float)kn__mxfp4_kvalues[q[j] & 0xF] * h;
            dst[2 * j + 1] = (float)kn__mxfp4_kvalues[q[j] >> 4] * h;
        }
    }
}

void kn__planar_row(const kn_mat *W, int64_t r, float *dst) {
    const uint8_t *codes = W->data, *scales = codes + (size_t)(W->rows * W->cols / 2);
    const uint8_t *q = codes + (size_t)(r * W->cols / 2), *e = scales + (size_t)(r * W->cols / 32);
    for (int64_t g = 0; g < W->cols / KN__QK32; g++, q += 16, dst += KN__QK32) {
        const float h = kn__e8m0_half(e[g]);
        for (int j = 0; j < 16; j++) {
            dst[2 * j] = (float)kn__mxfp4_kvalues[q[j] & 0xF] * h;
            dst[2 * j + 1] = (float)kn__mxfp4_kvalues[q[j] >> 4] * h;
        }
    }
}

/* MXFP4's quantizer (the same codes and exponents), written planar. */
void kn__quant_mxfp4_ct(const float *src, void *dst, int64_t k) {
    uint8_t blk[KN__MXFP4_BYTES], *q = dst, *e = q + k / 2;
    for (int64_t g = 0; g < k / KN__QK32; g++) {
        kn__quant_mxfp4(src + g * KN__QK32, blk, KN__QK32);
        from_block(blk, &e[g], q + 16 * g);
    }
}

/* ---- kernels ----------------------------------------------------------------------------------
 */

/* The MXFP4 kernel a planar kernel runs on its tiles: the active ISA's or the reference's. */
typedef const kn__kernel *(*inner_fn)(kn_type t, kn_numerics num);

static kn_mat tile_of(const kn_mat *W, int64_t rows, const void *data) {
    const size_t rs = kn_row_size(KN_MXFP4, W->cols);
    return (kn_mat){.type = KN_MXFP4, .rows = rows, .cols = W->cols, .row_bytes = rs, .data = data};
}

static size_t ct_scratch(const kn__kernel *in, const kn_mat *W, int64_t T) {
    const kn_mat tile = tile_of(W, CT_TILE, NULL);
    const size_t own = kn__align64((size_t)CT_TILE * tile.row_bytes);
    return own + (in->scratch_bytes ? in->scratch_bytes(&tile, T) : 0);
}

static void ct_rows(const kn__kernel *in, const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                    int64_t n0, int64_t n1, void *scratch) {
    uint8_t *buf = scratch;
    void *inner_scratch = buf + kn__align64((size_t)CT_TILE * kn_row_size(KN_MXFP4, W->cols));
    for (int64_t r = n0; r < n1; r += CT_TILE) {
        const int64_t n = n1 - r < CT_TILE ? n1 - r : CT_TILE;
        kn_mxfp4_ct_rows_to_blocks(W, r, n, buf);
        const kn_mat tile = tile_of(W, n, buf);
        in->rows(&tile, x, Y + r, ldy, 0, n, inner_scratch);
    }
}

/* Q8 numerics: the MXFP4 kernel's activation format, whatever it is. */
static const kn__kernel *q8_active(void) {
    return kn__kernel_isa(KN_MXFP4, KN_NUM_Q8);
}
static const kn__kernel *q8_ref(void) {
    return kn__kernel_scalar(KN_MXFP4, KN_NUM_Q8);
}
static const kn__kernel *f32_active(void) {
    return kn__kernel_isa(KN_MXFP4, KN_NUM_F32);
}
static const kn__kernel *f32_ref(void) {
    return kn__kernel_scalar(KN_MXFP4, KN_NUM_F32);
}

/* One planar kernel per inner kernel: its activation preparation forwarded, its rows tiled. */
#define CT_KERNEL(id, inner, with_act)                                                             \
    static size_t id##_act_bytes(int64_t k) {                                                      \
        return inner()->act_bytes(k);                                                              \
    }                                                                                              \
    static void id##_act_prep(const float *x, void *dst, int64_t k) {                              \
        inner()->act_prep(x, dst, k);                                                              \
    }                                                                                              \
    static size_t id##_scratch(const kn_mat *W, int64_t T) {                                       \
        return ct_scratch(inner(), W, T);                                                          \
    }                                                                                              \
    static void id##_rows(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,    \
                          int64_t n1, void *scratch) {                                             \
        const kn__kernel *in = inner();                                                            \
        if ((in->act_prep != NULL) != (with_act)) {                                                \
            fprintf(stderr, "moewire kernels: %s reads another activation format\n", in->name);    \
            abort();                                                                               \
        }                                                                                          \
        ct_rows(in, W, x, Y, ldy, n0, n1, scratch);                                                \
    }                                                                                              \
    static const kn__kernel id = {#id, (with_act) ? id##_act_bytes : NULL,                         \
                                  (with_act) ? id##_act_prep : NULL, id##_scratch, id##_rows}

CT_KERNEL(mxfp4_ct_q8, q8_active, true);
CT_KERNEL(mxfp4_ct_ref_q8, q8_ref, true);
CT_KERNEL(mxfp4_ct_float, f32_active, false);
CT_KERNEL(mxfp4_ct_ref_float, f32_ref, false);

const kn__kernel *kn__kernel_planar(kn_type t, kn_numerics num, bool ref) {
    if (t != KN_MXFP4_CT) return NULL;
    if (num == KN_NUM_Q8) return ref ? &mxfp4_ct_ref_q8 : &mxfp4_ct_q8;
    return ref ? &mxfp4_ct_ref_float : &mxfp4_ct_float;
}
