/* model/md_attn.h — attention of a batch of rows over their sequences' KV caches: GQA, causal,
 * sliding window, sinks (FORMATS.md §4); (row, KV head) groups spread over the thread pool. */
#ifndef MD_ATTN_H
#define MD_ATTN_H

#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_config.h"
#include "model/md_kv.h"
#include "model/md_model.h"

/* Per-thread score rows, kept between calls; and, for a cache that keeps another type than f32,
 * per-thread rows the cached keys and values are converted into (md_attention makes them). */
typedef struct md_attn_ws {
    float *scores;
    int64_t per_thread;
    int n_threads;
    float *conv;
    int64_t conv_per; /* floats per thread */
    int conv_threads;
} md_attn_ws;

int md_attn_ws_reserve(md_attn_ws *ws, const md_config *cfg, const md_row *rows, int64_t T,
                       int n_threads, mw_err *err);
void md_attn_ws_free(md_attn_ws *ws);

typedef struct md_attn_args {
    const md_config *cfg;
    const md_kv *kv; /* in a pass over these rows (md_kv_begin), this layer's K/V stored */
    int layer;
    const md_row *rows;
    int64_t T;
    const float *k, *v; /* the batch's K (T × n_head_kv·dk, after RoPE) and V of this layer */
    const float *q;     /* T × n_head × head_dim_k, after RoPE */
    const float *sinks; /* n_head logits, or NULL */
    float *out;         /* T × n_head × head_dim_v */
} md_attn_args;

/* Row t, query head h sees its sequence's keys at positions p' <= pos (and pos - p' < n_swa on
 * sliding-window layers), in position order whether they come from the cache or the batch; head h
 * reads KV head h / (n_head / n_head_kv). Scores are (q·k)·kq_scale; the sink logit joins the
 * softmax denominator only. */
int md_attention(const md_attn_args *a, md_attn_ws *ws, kn_pool *pool, mw_err *err);

#endif
