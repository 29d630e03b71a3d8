/* vindex/vx_hf_relayout.c — reading a stored tensor out of its Hugging Face sources: plain copies,
 * stacked per-expert tensors, de-interleaved rows, transposed experts and gpt-oss's MXFP4 blocks.
 * Every kind is a sequence of equal output units (a tensor, an expert, a row, a block, an element),
 * each found in or composed from the sources, so any byte range reads without materialising the
 * tensor. */
#include <string.h>

#include "vindex/vx_hf_internal.h"

/* HF packs two e2m1 codes per byte in element order: byte k holds element 2k (low nibble) and
 * 2k+1 (high nibble). ggml's block_mxfp4 holds element j in the low nibble of qs[j] and element
 * j+16 in its high nibble. The E8M0 scale byte means 2^(e-127) in both. */
void vx_hf_mxfp4_block(uint8_t scale, const uint8_t hf[16], uint8_t out[17]) {
    out[0] = scale;
    for (int j = 0; j < 16; j++) {
        int shift = (j & 1) * 4;
        uint8_t lo = (hf[j >> 1] >> shift) & 15;       /* element j */
        uint8_t hi = (hf[8 + (j >> 1)] >> shift) & 15; /* element j + 16 */
        out[1 + j] = (uint8_t)(lo | hi << 4);
    }
}

/* Source row of output row r: the same row, or one of an interleaved pair. */
static int64_t src_row(const hf_src_impl *s, int64_t r) {
    return s->parity < 0 ? r : 2 * r + s->parity;
}
static int64_t src_rows(const hf_src_impl *s) {
    return s->parity < 0 ? s->rows : 2 * s->rows;
}

typedef const uint8_t *(*unit_fn)(const hf_src_impl *s, uint64_t u, uint8_t *tmp);

static const uint8_t *unit_direct(const hf_src_impl *s, uint64_t u, uint8_t *tmp) {
    (void)u, (void)tmp;
    return s->src[0]->data;
}

static const uint8_t *unit_stack(const hf_src_impl *s, uint64_t u, uint8_t *tmp) {
    (void)tmp;
    return s->src[u]->data;
}

/* [n_mat, rows (or 2 rows interleaved), cols] → [n_mat, rows, cols] */
static const uint8_t *unit_row(const hf_src_impl *s, uint64_t u, uint8_t *tmp) {
    (void)tmp;
    int64_t m = (int64_t)u / s->rows, r = (int64_t)u % s->rows;
    return s->src[0]->data + (uint64_t)(m * src_rows(s) + src_row(s, r)) * s->cols * s->esz;
}

/* blocks [n_mat, rows', cols/32, 16] and scales [n_mat, rows', cols/32] → one block_mxfp4 */
static const uint8_t *unit_mxfp4(const hf_src_impl *s, uint64_t u, uint8_t *tmp) {
    int64_t g_per_row = s->cols / 32;
    int64_t g = (int64_t)u % g_per_row, row = (int64_t)u / g_per_row;
    int64_t m = row / s->rows, r = row % s->rows;
    uint64_t blk = (uint64_t)((m * src_rows(s) + src_row(s, r)) * g_per_row + g);
    vx_hf_mxfp4_block(s->src[1]->data[blk], s->src[0]->data + blk * 16, tmp);
    return tmp;
}

/* [n_mat, cols, rows (or 2 rows interleaved)] → [n_mat, rows, cols]: one element */
static const uint8_t *unit_transpose(const hf_src_impl *s, uint64_t u, uint8_t *tmp) {
    (void)tmp;
    int64_t c = (int64_t)u % s->cols, mr = (int64_t)u / s->cols;
    int64_t m = mr / s->rows, r = mr % s->rows;
    return s->src[0]->data + (uint64_t)((m * s->cols + c) * src_rows(s) + src_row(s, r)) * s->esz;
}

int vx_hf_read(const vx_input *in, const vx_input_tensor *t, uint64_t off, void *dst, uint64_t len,
               mw_err *err) {
    (void)in;
    if (off > t->nbytes || len > t->nbytes - off)
        return mw_errf(err, "%s: read of %llu bytes at %llu runs past its %llu bytes", t->name,
                       (unsigned long long)len, (unsigned long long)off,
                       (unsigned long long)t->nbytes);
    if (!len) return 0;
    const hf_src_impl *s = t->impl;
    uint64_t unit;
    unit_fn fn;
    switch (s->kind) {
    case HR_DIRECT:
        unit = t->nbytes, fn = unit_direct;
        break;
    case HR_STACK:
        unit = t->nbytes / (uint64_t)s->n_src, fn = unit_stack;
        break;
    case HR_ROWS:
        unit = (uint64_t)s->cols * s->esz, fn = unit_row;
        break;
    case HR_MXFP4:
        unit = 17, fn = unit_mxfp4;
        break;
    case HR_TRANSPOSE:
        unit = s->esz, fn = unit_transpose;
        break;
    default:
        return mw_errf(err, "%s: no reader for this tensor", t->name);
    }
    uint8_t tmp[17], *out = dst;
    while (len) {
        uint64_t u = off / unit, within = off % unit;
        uint64_t n = unit - within < len ? unit - within : len;
        memcpy(out, fn(s, u, tmp) + within, n);
        out += n, off += n, len -= n;
    }
    return 0;
}
