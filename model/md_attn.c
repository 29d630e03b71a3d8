/* model/md_attn.c — the attention of one layer for a batch. Each (row, KV head) is independent, so
 * the pool splits them into contiguous ranges of equal cost; a row's result does not depend on the
 * split. */
#include "model/md_attn.h"

#include <stdlib.h>
#include <string.h>

#include "model/md_ops.h"

/* Scores of the query heads sharing a KV head: g × positions per thread. */
int md_attn_ws_reserve(md_attn_ws *ws, const md_config *cfg, const md_row *rows, int64_t T,
                       int n_threads, mw_err *err) {
    int64_t need = 1;
    for (int64_t t = 0; t < T; t++)
        if (rows[t].pos + 1 > need) need = rows[t].pos + 1;
    need *= cfg->n_head / cfg->n_head_kv;
    if (n_threads < 1) n_threads = 1;
    if (need <= ws->per_thread && n_threads <= ws->n_threads) return 0;
    int64_t per = ws->per_thread > need ? ws->per_thread : need;
    if (per < 2 * ws->per_thread) per = 2 * ws->per_thread; /* amortize growth while decoding */
    int nt = n_threads > ws->n_threads ? n_threads : ws->n_threads;
    /* slots apart: each thread rewrites its scores for every group (kn_slots_bytes) */
    float *s = realloc(ws->scores, kn_slots_bytes((size_t)per * sizeof(float), nt));
    if (!s) return mw_errf(err, "attention: out of memory for %lld scores", (long long)per);
    ws->scores = s;
    ws->per_thread = per;
    ws->n_threads = nt;
    return 0;
}

void md_attn_ws_free(md_attn_ws *ws) {
    free(ws->scores);
    free(ws->conv);
    memset(ws, 0, sizeof *ws);
}

#define KEY_BLOCK 64

typedef struct task {
    const md_attn_args *a;
    md_attn_ws *ws;
    const md_vec *vec;
} task;

/* The first position row t sees on this layer (sliding-window layers see the last n_swa). */
static int64_t first_visible(const md_attn_args *a, int64_t t) {
    const int64_t pos = a->rows[t].pos;
    return a->cfg->layer_swa[a->layer] && pos - a->cfg->n_swa + 1 > 0 ? pos - a->cfg->n_swa + 1 : 0;
}

/* Row t, KV head kvh, its query heads [j0, j1): they go over the visible keys together, in blocks
 * of rows, so each key and value row is loaded once for all of them. Head h's scores, softmax and
 * sum are exactly those of a head on its own: md_dot per key, then out += p · v in position order
 * — so how the heads and keys are grouped does not change a bit. A cache of another type than f32
 * converts a block's rows (this KV head's part) into conv, KEY_BLOCK rows of max(dk, dv). */
static void one_group(const task *tk, int64_t t, int kvh, int j0, int j1, float *scores,
                      float *conv) {
    const md_attn_args *a = tk->a;
    const md_config *c = a->cfg;
    const int dk = c->head_dim_k, dv = c->head_dim_v;
    const int g = j1 - j0, h0 = kvh * (c->n_head / c->n_head_kv) + j0;
    const int64_t t0 = first_visible(a, t), n = a->rows[t].pos - t0 + 1;
    const float *q = a->q + (t * c->n_head + h0) * dk;
    const md_kv_iter from = md_kv_iter_at(a->kv, a->layer, t, t0, a->k, a->v);
    const float *rb[KEY_BLOCK];
    md_kv_iter it = from;
    for (int64_t i = 0; i < n; i += KEY_BLOCK) {
        const int64_t nb = n - i < KEY_BLOCK ? n - i : KEY_BLOCK;
        md_kv_iter_keys(&it, (int64_t)kvh * dk, dk, nb, rb, conv);
        tk->vec->dots(q, g, rb, nb, dk, c->kq_scale, scores + i, n);
    }
    for (int j = 0; j < g; j++)
        tk->vec->softmax(scores + j * n, n, a->sinks ? &a->sinks[h0 + j] : NULL);
    float *out = a->out + (t * c->n_head + h0) * dv;
    memset(out, 0, (size_t)g * dv * sizeof *out);
    it = from;
    for (int64_t i = 0; i < n; i += KEY_BLOCK) {
        const int64_t nb = n - i < KEY_BLOCK ? n - i : KEY_BLOCK;
        md_kv_iter_values(&it, (int64_t)kvh * dv, dv, nb, rb, conv);
        tk->vec->wsums(out, g, rb, nb, dv, scores + i, n);
    }
}

/* A work item's cost: its keys, plus a little for what a group does whatever its length. */
static int64_t row_cost(const md_attn_args *a, int64_t t) {
    return a->rows[t].pos - first_visible(a, t) + 1 + 16;
}

/* The first of the per_row · T items whose cost so far reaches `target`. */
static int64_t item_at(const md_attn_args *a, int64_t per_row, int64_t target) {
    int64_t sum = 0;
    for (int64_t t = 0; t < a->T; t++) {
        const int64_t c = row_cost(a, t);
        if (sum + per_row * c > target) return t * per_row + (target - sum + c - 1) / c;
        sum += per_row * c;
    }
    return a->T * per_row;
}

/* Work items are (row, KV head, chunk of its query heads). A KV head's heads are split in chunks
 * only when there are fewer (row, KV head) pairs than threads: latent attention has one KV head,
 * and a decode step one row. Threads take contiguous ranges of equal cost (a prompt's rows see
 * 1 to n keys; the rows of a serving step have any lengths). */
static void run(void *arg, int ith, int nth) {
    const task *tk = arg;
    const md_attn_args *a = tk->a;
    const int hk = a->cfg->n_head_kv, g = a->cfg->n_head / hk;
    int chunks = a->T * hk < nth ? nth : 1;
    if (chunks > g) chunks = g;
    const int64_t per_row = (int64_t)hk * chunks;
    int64_t total = 0;
    for (int64_t t = 0; t < a->T; t++) total += per_row * row_cost(a, t);
    const int64_t lo = ith ? item_at(a, per_row, total * ith / nth) : 0;
    const int64_t hi =
        ith + 1 < nth ? item_at(a, per_row, total * (ith + 1) / nth) : a->T * per_row;
    float *scores = kn_slot(tk->ws->scores, (size_t)tk->ws->per_thread * sizeof(float), ith);
    float *conv = tk->ws->conv_per
                      ? kn_slot(tk->ws->conv, (size_t)tk->ws->conv_per * sizeof(float), ith)
                      : NULL;
    for (int64_t i = lo; i < hi; i++) {
        const int64_t pair = i / chunks;
        const int ch = (int)(i % chunks);
        one_group(tk, pair / hk, (int)(pair % hk), g * ch / chunks, g * (ch + 1) / chunks, scores,
                  conv);
    }
}

/* Conversion rows for every thread when the cache keeps another type than f32 (none otherwise). */
static int reserve_conv(const md_attn_args *a, md_attn_ws *ws, int n_threads, mw_err *err) {
    if (a->kv->type == KN_F32) {
        ws->conv_per = 0;
        return 0;
    }
    const int64_t d =
        a->cfg->head_dim_k > a->cfg->head_dim_v ? a->cfg->head_dim_k : a->cfg->head_dim_v;
    const int64_t per = KEY_BLOCK * d;
    if (ws->conv && per <= ws->conv_per && n_threads <= ws->conv_threads) return 0;
    float *c = realloc(ws->conv, kn_slots_bytes((size_t)per * sizeof(float), n_threads));
    if (!c) return mw_errf(err, "attention: out of memory for the cache's converted rows");
    ws->conv = c;
    ws->conv_per = per;
    ws->conv_threads = n_threads;
    return 0;
}

int md_attention(const md_attn_args *a, md_attn_ws *ws, kn_pool *pool, mw_err *err) {
    if (kn_pool_size(pool) > ws->n_threads)
        return mw_errf(err, "attention: scratch reserved for %d threads, pool has %d",
                       ws->n_threads, kn_pool_size(pool));
    if (reserve_conv(a, ws, ws->n_threads, err)) return -1;
    task tk = {a, ws, md_vec_active()};
    kn_pool_run(pool, run, &tk);
    return 0;
}
