/* model/md_attnres.h — Kimi K3's attention residuals (FORMATS.md §9, step 5): instead of one
 * residual stream, every token keeps a stack of banked block sums (the layer input at every
 * attn_res.block_size-th layer, the embedding first) and the running sum of the current block; the
 * input of every attention block, every FFN and the output norm is a softmax mix of the stack and
 * the running sum, scored by a per-layer vector against their RMS-normalized values.
 *
 * The mixing is per token, over layers, never over positions: nothing outlives a pass. A token's
 * stack holds at most ceil(n_layer / block_size) vectors of n_embd floats, so its memory is bounded
 * by the model (md_attnres_bytes_per_token) whatever the context. */
#ifndef MD_ATTNRES_H
#define MD_ATTNRES_H

#include <stdbool.h>
#include <stdint.h>

#include "model/md_config.h"
#include "util/mw_err.h"

typedef struct md_attnres {
    int block;     /* attn_res.block_size; 0: plain residual stream (everything a no-op) */
    int n_ckpt;    /* checkpoints a token banks over the layers */
    int64_t E;     /* n_embd */
    float eps;     /* the RMS normalization's */
    int n;         /* checkpoints banked so far in the pass */
    int64_t T_cap; /* rows the buffers hold */
    float *stack;  /* T_cap × n_ckpt × E, checkpoint k of row t at (t · n_ckpt + k) · E */
    float *mix;    /* T_cap × E: the last mix */
    float *probs;  /* T_cap × (n_ckpt + 1): its softmax weights, the current stream last */
    float *tmp;    /* E */
} md_attnres;

void md_attnres_init(md_attnres *a, const md_config *cfg);
void md_attnres_free(md_attnres *a);

static inline bool md_attnres_on(const md_attnres *a) {
    return a->block > 0;
}

/* Bytes a token's stack and mix take during a pass (0 without attention residuals). */
uint64_t md_attnres_bytes_per_token(const md_config *cfg);

/* Starts a pass of T rows: room for them, the stack emptied. */
int md_attnres_begin(md_attnres *a, int64_t T, mw_err *err);

/* Whether layer il banks its input (a checkpoint layer). */
static inline bool md_attnres_banks(const md_attnres *a, int il) {
    return md_attnres_on(a) && il % a->block == 0;
}

/* Banks the T rows of cur (n_embd each) as the next checkpoint. */
void md_attnres_bank(md_attnres *a, const float *cur, int64_t T);

/* The mix of the stack and cur with the score vector w (n_embd): cur itself while nothing is
 * banked, else a->mix, with the softmax weights in a->probs (T × (a->n + 1)). */
const float *md_attnres_mix(md_attnres *a, const float *w, const float *cur, int64_t T);

#endif
