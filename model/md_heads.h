/* model/md_heads.h — one small matmul per attention head, as latent attention needs them: each
 * head's rows of a strided activation go through that head's matrix (attn_k_b absorbs q_nope into
 * the latent space, attn_v_b maps the attended latent to the head's output). The heads are spread
 * over the pool; each head's matmul runs on one thread, so a row's result is that of kn_matmul. */
#ifndef MD_HEADS_H
#define MD_HEADS_H

#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_model.h"
#include "util/mw_err.h"

/* Gather / output buffers per thread, kept between calls. */
typedef struct md_heads_ws {
    float *buf;
    size_t per_thread; /* floats */
    int n_threads;
} md_heads_ws;

void md_heads_ws_free(md_heads_ws *ws);

/* A strided view of T rows × n_heads heads of `width` floats: head h of row t starts at
 * data + t·row + h·head. */
typedef struct md_strided {
    float *data;
    int64_t row, head;
} md_strided;

/* For every head h < n_heads and row t < T: y(t, h) = W_h · x(t, h), W_h = md_head(w, h)
 * (rows outputs × cols inputs). */
int md_heads_matmul(const md_heads *w, int n_heads, md_strided x, md_strided y, int64_t T,
                    kn_numerics num, kn_pool *pool, md_heads_ws *ws, mw_err *err);

#endif
