/* metal/mt_internal.h — what mt_dev.c (the device, the tables) and mt_exec.c (the executor)
 * share, and nothing outside metal/ may use. */
#ifndef MT_INTERNAL_H
#define MT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "metal/mt_backend.h"

/* A matrix as the kernels reach it: its buffer and offset there. */
typedef struct mt__mat {
    kn_type type;
    int64_t rows, cols;
    int stride; /* bytes between rows */
    int region;
    uint64_t off;
    const void *data; /* the view's pointer, to check a lookup against */
} mt__mat;

enum { MT_GATE, MT_UP, MT_DOWN, MT_GATE_B, MT_UP_B, MT_DOWN_B, MT_N_MATS };

typedef struct mt__expert {
    mt__mat m[MT_N_MATS]; /* biases as F32 (converted at open when stored otherwise) */
    bool loaded;
} mt__expert;

/* One weight format's kernels: Q8 mode (matvec, tiled) with its activation format, and float
 * lanes. */
typedef struct mt__format {
    kn_type type, act;
    const char *mv, *mm, *f32;
} mt__format;
const mt__format *mt__format_of(kn_type t); /* NULL: no kernels */
const char *mt__quant_kernel(kn_type act);  /* Q8_0 or Q8_K activations */
const char *mt__glu_kernel(kn_glu_kind k);  /* NULL: none */

/* The executor's growing arrays, kept between calls. */
typedef struct mt__ws {
    void *slots, *groups, *tmp;
    size_t slots_cap, groups_cap, tmp_cap;
    mt_dispatch *dsp;
    size_t dsp_cap;
    int n_dsp;
} mt__ws;

struct mt_dev {
    const mt_backend *be;
    void *impl;
    mt_backend_info info;
    double read_gbps;
    int n_layers, n_experts;
    mt__expert *experts; /* n_layers × n_experts */
    float *biases;       /* converted biases (page-aligned, wrapped as a region) */
    mt_region *regions;
    int n_regions;
    mt__ws ws;
};

static inline mt__expert *mt__at(const struct mt_dev *d, int layer, int expert) {
    return &d->experts[(size_t)layer * (size_t)d->n_experts + (size_t)expert];
}

/* Appends a dispatch to the workspace's list (zeroed, bindings unbound); NULL when out of memory.
 */
mt_dispatch *mt__dispatch(mt__ws *ws, const char *kernel, uint32_t gx, uint32_t gy);
void mt__ws_free(mt__ws *ws);

static inline uint32_t mt__cdiv(int64_t a, int64_t b) {
    return (uint32_t)((a + b - 1) / b);
}

/* Rounds up to the alignment of every scratch array. */
static inline size_t mt__align(size_t n) {
    return (n + 255) & ~(size_t)255;
}

static inline mt_bind mt__scratch_at(size_t off) {
    return (mt_bind){MT_BUF_SCRATCH, off};
}

/* The matmul dispatch for W against T tokens: x rows (index list at x_index, or MT_NO_INDEX),
 * outputs to y rows (likewise), bias optional. */
typedef struct mt__mm {
    const mt__mat *W, *bias;
    kn_numerics num;
    mt_variant var;
    int64_t T;
    mt_bind x, y, ix;
    int x_stride, x_index, y_stride, y_index;
} mt__mm;
int mt__add_matmul(mt__ws *ws, const mt__mm *m);
/* Quantizes T rows of K floats (x, rows x_stride apart) to act rows at y (y_stride apart). */
int mt__add_quant(mt__ws *ws, kn_type act, int64_t K, int64_t T, mt_bind x, int x_stride, mt_bind y,
                  int y_stride);

#endif
