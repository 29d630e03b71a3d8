/* vindex/vx_hf_relayout.c — reading a stored tensor out of its Hugging Face sources: plain copies,
 * stacked per-expert tensors, de-interleaved rows, transposed experts, gpt-oss's MXFP4 blocks,
 * DeepSeek's FP8 weights with their block scales, the split of MLA's kv_b_proj and
 * compressed-tensors' packed MXFP4 experts.
 * Any byte range reads without materialising the tensor: whole output rows are composed straight
 * into the caller's buffer, a partial row at either end through a one-row buffer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"

#include "vindex/vx_hf_internal.h"

/* HF packs two e2m1 codes per byte in element order: byte k holds element 2k (low nibble) and
 * 2k+1 (high nibble). ggml's block_mxfp4 holds element j in the low nibble of qs[j] and element
 * j+16 in its high nibble. The E8M0 scale byte means 2^(e-127) in both. */
void vx__hf_mxfp4_block(uint8_t scale, const uint8_t hf[16], uint8_t out[17]) {
    out[0] = scale;
    for (int k = 0; k < 8; k++) {
        uint8_t a = hf[k], b = hf[8 + k]; /* elements 2k, 2k+1 and 2k+16, 2k+17 */
        out[1 + 2 * k] = (uint8_t)((a & 15) | (b & 15) << 4);
        out[2 + 2 * k] = (uint8_t)((a >> 4) | (b & 0xF0));
    }
}

/* Source row of output row r of a matrix: the same row, or one of an interleaved pair. */
static int64_t src_row(const vx__hf_src *s, int64_t r) {
    return s->parity < 0 ? r : 2 * r + s->parity;
}
static int64_t src_rows(const vx__hf_src *s) {
    return s->parity < 0 ? s->rows : 2 * s->rows;
}

/* Output rows [row0, row0 + n) (global over the n_mat matrices) composed into dst. */
typedef void (*rows_fn)(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst);

/* [n_mat, rows (or 2 rows interleaved), cols] → [n_mat, rows, cols] */
static void rows_copy(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst) {
    uint64_t rb = (uint64_t)s->cols * s->esz;
    for (int64_t i = row0; i < row0 + n; i++, dst += rb) {
        int64_t m = i / s->rows, r = i % s->rows;
        memcpy(dst, s->src[0]->data + (uint64_t)(m * src_rows(s) + src_row(s, r)) * rb, rb);
    }
}

/* blocks [n_mat, rows', cols/32, 16] and scales [n_mat, rows', cols/32] → block_mxfp4 rows */
static void rows_mxfp4(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst) {
    int64_t groups = s->cols / 32;
    for (int64_t i = row0; i < row0 + n; i++) {
        int64_t m = i / s->rows, r = i % s->rows;
        uint64_t blk = (uint64_t)((m * src_rows(s) + src_row(s, r)) * groups);
        const uint8_t *q = s->src[0]->data + blk * 16, *e = s->src[1]->data + blk;
        for (int64_t g = 0; g < groups; g++, dst += 17) vx__hf_mxfp4_block(e[g], q + 16 * g, dst);
    }
}

/* compressed-tensors: expert m's weight_packed [rows, cols/2] (src[m]) and weight_scale
 * [rows, cols/32] (src[n_mat + m]) as they are stored, one after the other (mxfp4_ct: the
 * kernels read the planes as they are). */
static void read_ct_planes(const vx__hf_src *s, uint64_t off, uint8_t *out, uint64_t len) {
    const uint64_t codes = (uint64_t)(s->rows * s->cols / 2),
                   scales = (uint64_t)(s->rows * s->cols / 32);
    while (len) {
        const uint64_t m = off / (codes + scales), within = off % (codes + scales);
        const bool in_codes = within < codes;
        const uint8_t *from =
            in_codes ? s->src[m]->data + within : s->src[s->n_mat + m]->data + (within - codes);
        const uint64_t left = in_codes ? codes - within : codes + scales - within;
        const uint64_t n = left < len ? left : len;
        memcpy(out, from, n);
        out += n, off += n, len -= n;
    }
}

/* An F32, BF16 or F16 element as float. */
static float elem_f32(const vx_st_tensor *t, int64_t i) {
    const uint8_t *p = t->data;
    float x;
    if (t->dtype == VX_ST_F32) {
        memcpy(&x, p + 4 * i, 4);
        return x;
    }
    const uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return t->dtype == VX_ST_BF16 ? kn_bf16_to_f32(h) : kn_fp16_to_f32(h);
}

/* KDA's A_log as the decay rate −exp(A_log) llama.cpp's converter folds it into (one row). */
static void row_neg_exp(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst) {
    (void)row0, (void)n;
    for (int64_t i = 0; i < s->cols; i++) {
        const float v = -expf(elem_f32(s->src[0], i));
        memcpy(dst + 4 * i, &v, 4);
    }
}

/* K3's residual score: the norm and projection weights multiplied (one row). */
static void row_res_product(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst) {
    (void)row0, (void)n;
    for (int64_t i = 0; i < s->cols; i++) {
        const float v = elem_f32(s->src[0], i) * elem_f32(s->src[1], i);
        memcpy(dst + 4 * i, &v, 4);
    }
}

/* One element; the common sizes without a call. */
static inline void copy_elem(uint8_t *d, const uint8_t *s, uint64_t esz) {
    if (esz == 2)
        memcpy(d, s, 2);
    else if (esz == 4)
        memcpy(d, s, 4);
    else
        memcpy(d, s, esz);
}

/* [n_mat, cols, rows (or 2 rows interleaved)] → [n_mat, rows, cols], in tiles of TILE output rows
 * so that both sides stay in cache. */
#define TILE 64
static void rows_transpose(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst) {
    uint64_t esz = s->esz, rb = (uint64_t)s->cols * esz, sr_n = (uint64_t)src_rows(s);
    for (int64_t i = row0; i < row0 + n;) {
        int64_t m = i / s->rows, r = i % s->rows;
        int64_t k = s->rows - r < TILE ? s->rows - r : TILE;
        if (k > row0 + n - i) k = row0 + n - i;
        uint8_t *out = dst + (uint64_t)(i - row0) * rb;
        const uint8_t *base = s->src[0]->data + (uint64_t)m * (uint64_t)s->cols * sr_n * esz;
        for (int64_t c = 0; c < s->cols; c++) {
            const uint8_t *col = base + (uint64_t)c * sr_n * esz;
            for (int64_t t = 0; t < k; t++)
                copy_elem(out + (uint64_t)t * rb + (uint64_t)c * esz,
                          col + (uint64_t)src_row(s, r + t) * esz, esz);
        }
        i += k;
    }
}

/* ---- FP8 block-scaled weights and the kv_b split ------------------------------------------ */

float vx__fp8_e4m3(uint8_t b) {
    const int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    float v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9); /* subnormal: m/8 · 2^-6 */
    else
        v = ldexpf((float)(8 + m), e - 10); /* (1 + m/8) · 2^(e-7) */
    return sign ? -v : v;
}

/* Where element (row i, column c) of the output comes from: source tensor *k, its row and column.
 */
static void locate(const vx__hf_src *s, int64_t i, int64_t c, int *k, int64_t *r, int64_t *col) {
    const int64_t m = i / s->rows, rr = i % s->rows;
    switch (s->kind) {
    case VX__HR_STACK:
        *k = (int)m, *r = rr, *col = c;
        return;
    case VX__HR_KV_B: /* per head nope key rows, then v value rows */
        *k = 0;
        if (s->parity == 0)
            *r = m * (s->nope + s->v) + c, *col = rr; /* K_h: the key rows, transposed */
        else
            *r = m * (s->nope + s->v) + s->nope + rr, *col = c;
        return;
    default:
        *k = 0, *r = i, *col = c;
        return;
    }
}

/* Element (r, c) of FP8 source k times its block's scale: the exact f32 product, as DeepSeek's
 * reference dequantization computes it (weight.float() * scale_inv). */
static float fp8_value(const vx__hf_src *s, int k, int64_t r, int64_t c) {
    const vx_st_tensor *w = s->src[k], *sc = s->scale[k];
    const int64_t cols = w->shape[1], sb = sc->shape[1];
    const int64_t si = (r / s->block[0]) * sb + c / s->block[1];
    float scale;
    if (sc->dtype == VX_ST_BF16) {
        const uint8_t *p = sc->data + 2 * si;
        scale = kn_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
    } else {
        memcpy(&scale, sc->data + 4 * si, 4);
    }
    return vx__fp8_e4m3(w->data[r * cols + c]) * scale;
}

/* Output rows [row0, row0 + n) element by element: FP8 sources as bf16 of the exact product,
 * others copied as they are (esz bytes). */
static void rows_mapped(const vx__hf_src *s, int64_t row0, int64_t n, uint8_t *dst) {
    for (int64_t i = row0; i < row0 + n; i++)
        for (int64_t c = 0; c < s->cols; c++) {
            int k;
            int64_t r, col;
            locate(s, i, c, &k, &r, &col);
            if (s->scale) {
                const uint16_t b = kn_f32_to_bf16(fp8_value(s, k, r, col));
                dst[0] = (uint8_t)b, dst[1] = (uint8_t)(b >> 8);
                dst += 2;
            } else {
                const int64_t src_cols = s->src[k]->shape[s->src[k]->n_dims - 1];
                copy_elem(dst, s->src[k]->data + (uint64_t)(r * src_cols + col) * s->esz, s->esz);
                dst += s->esz;
            }
        }
}

int vx__hf_read_f32(const vx_input *in, const vx_input_tensor *t, uint64_t row0, uint64_t n,
                    float *dst, mw_err *err) {
    (void)in;
    const vx__hf_src *s = t->impl;
    if (!s->scale) return mw_errf(err, "%s: not an FP8 tensor", t->name);
    if (row0 > (uint64_t)(s->n_mat * s->rows) || n > (uint64_t)(s->n_mat * s->rows) - row0)
        return mw_errf(err, "%s: rows [%llu, +%llu) are outside the tensor", t->name,
                       (unsigned long long)row0, (unsigned long long)n);
    for (uint64_t i = row0; i < row0 + n; i++)
        for (int64_t c = 0; c < s->cols; c++) {
            int k;
            int64_t r, col;
            locate(s, (int64_t)i, c, &k, &r, &col);
            *dst++ = fp8_value(s, k, r, col);
        }
    return 0;
}

/* The stored tensor as whole rows: leading and trailing partial rows go through a row buffer. */
static int read_rows(const vx_input_tensor *t, uint64_t rb, rows_fn fn, uint64_t off, uint8_t *out,
                     uint64_t len, mw_err *err) {
    const vx__hf_src *s = t->impl;
    uint8_t *row = NULL;
    if (off % rb || len % rb) {
        row = malloc(rb);
        if (!row) return mw_errf(err, "%s: out of memory", t->name);
    }
    while (len) {
        int64_t i = (int64_t)(off / rb);
        uint64_t within = off % rb;
        if (within || len < rb) {
            uint64_t n = rb - within < len ? rb - within : len;
            fn(s, i, 1, row);
            memcpy(out, row + within, n);
            out += n, off += n, len -= n;
        } else {
            int64_t n = (int64_t)(len / rb);
            fn(s, i, n, out);
            out += (uint64_t)n * rb, off += (uint64_t)n * rb, len -= (uint64_t)n * rb;
        }
    }
    free(row);
    return 0;
}

/* Per-expert tensors of equal size, one after the other. */
static void read_stack(const vx_input_tensor *t, uint64_t off, uint8_t *out, uint64_t len) {
    const vx__hf_src *s = t->impl;
    uint64_t slice = t->nbytes / (uint64_t)s->n_src;
    while (len) {
        uint64_t e = off / slice, within = off % slice;
        uint64_t n = slice - within < len ? slice - within : len;
        memcpy(out, s->src[e]->data + within, n);
        out += n, off += n, len -= n;
    }
}

int vx__hf_read(const vx_input *in, const vx_input_tensor *t, uint64_t off, void *dst, uint64_t len,
                mw_err *err) {
    (void)in;
    if (off > t->nbytes || len > t->nbytes - off)
        return mw_errf(err, "%s: read of %llu bytes at %llu runs past its %llu bytes", t->name,
                       (unsigned long long)len, (unsigned long long)off,
                       (unsigned long long)t->nbytes);
    if (!len) return 0;
    const vx__hf_src *s = t->impl;
    switch (s->kind) {
    case VX__HR_DIRECT:
        if (s->scale) return read_rows(t, (uint64_t)s->cols * 2, rows_mapped, off, dst, len, err);
        memcpy(dst, s->src[0]->data + off, len);
        return 0;
    case VX__HR_STACK:
        if (s->scale) return read_rows(t, (uint64_t)s->cols * 2, rows_mapped, off, dst, len, err);
        read_stack(t, off, dst, len);
        return 0;
    case VX__HR_KV_B:
        return read_rows(t, (uint64_t)s->cols * (s->scale ? 2 : s->esz), rows_mapped, off, dst, len,
                         err);
    case VX__HR_ROWS:
        return read_rows(t, (uint64_t)s->cols * s->esz, rows_copy, off, dst, len, err);
    case VX__HR_MXFP4:
        return read_rows(t, (uint64_t)s->cols / 32 * 17, rows_mxfp4, off, dst, len, err);
    case VX__HR_TRANSPOSE:
        return read_rows(t, (uint64_t)s->cols * s->esz, rows_transpose, off, dst, len, err);
    case VX__HR_CT_MXFP4:
        read_ct_planes(s, off, dst, len);
        return 0;
    case VX__HR_CONV:
        memcpy(dst, s->src[0]->data + off, len);
        return 0;
    case VX__HR_NEG_EXP:
        return read_rows(t, (uint64_t)s->cols * 4, row_neg_exp, off, dst, len, err);
    case VX__HR_RES_PRODUCT:
        return read_rows(t, (uint64_t)s->cols * 4, row_res_product, off, dst, len, err);
    }
    return mw_errf(err, "%s: no reader for this tensor", t->name);
}
