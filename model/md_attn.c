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

/* Rows handed to the dots and weighted sums at a time, between which a part of the next block is
 * prefetched (both kernels take keys in runs of 8, and a value row's sums start from the stored
 * output, so the calls' split does not change a bit). */
#define SUB_BLOCK 16

/* The block of rows after the one being read (keys, then values, then the next item's first keys),
 * prefetched a part per SUB_BLOCK: the cache's rows come from memory (a step streams the expert
 * weights between two layers' attention), and a KV head's slice of each position's row is a few
 * lines every kd floats, which the hardware prefetchers do not run ahead on. Only for a cache of
 * f32, whose rows are read in place. */
typedef struct ahead {
    const float *rows[KEY_BLOCK];
    int64_t nb, done;
    size_t bytes; /* of each row's slice */
} ahead;

static void ahead_upto(ahead *a, int64_t upto) {
    if (upto > a->nb) upto = a->nb;
    for (; a->done < upto; a->done++) {
        const uintptr_t p = (uintptr_t)a->rows[a->done], end = p + a->bytes;
        for (uintptr_t l = p & ~(uintptr_t)63; l < end; l += 64)
            __builtin_prefetch((const void *)l, 0, 2);
    }
}

/* The next nb (at most KEY_BLOCK) rows of `it` — keys or values — as the block to prefetch. */
static void ahead_set(ahead *a, md_kv_iter *it, bool values, int64_t off, int64_t n,
                      int64_t *left) {
    a->nb = *left < KEY_BLOCK ? *left : KEY_BLOCK;
    a->done = 0;
    a->bytes = (size_t)n * sizeof(float);
    if (values)
        md_kv_iter_values(it, off, n, a->nb, a->rows, NULL);
    else
        md_kv_iter_keys(it, off, n, a->nb, a->rows, NULL);
    *left -= a->nb;
}

/* A work item: row t, KV head kvh, its query heads [j0, j1). */
typedef struct item {
    int64_t t;
    int kvh, j0, j1;
} item;

/* The first position row t sees on this layer (sliding-window layers see the last n_swa). */
static int64_t first_visible(const md_attn_args *a, int64_t t) {
    const int64_t pos = a->rows[t].pos;
    return a->cfg->layer_swa[a->layer] && pos - a->cfg->n_swa + 1 > 0 ? pos - a->cfg->n_swa + 1 : 0;
}

/* The keys item `w` starts with: from its first visible position, and how many. */
static md_kv_iter item_keys(const md_attn_args *a, const item *w, int64_t *n) {
    const int64_t t0 = first_visible(a, w->t);
    *n = a->rows[w->t].pos - t0 + 1;
    return md_kv_iter_at(a->kv, a->layer, w->t, t0, a->k, a->v);
}

/* The item's query heads go over the visible keys together, in blocks of rows, so each key and
 * value row is loaded once for all of them. Head h's scores, softmax and sum are exactly those of a
 * head on its own: md_dot per key, then out += p · v in position order — so how the heads and keys
 * are grouped does not change a bit. A cache of another type than f32 converts a block's rows (this
 * KV head's part) into conv, KEY_BLOCK rows of max(dk, dv). `warm`: the item before prefetched this
 * one's first keys; `next`: the item after, whose first keys this one prefetches (NULL: none). */
static void one_group(const task *tk, const item *w, bool warm, const item *next, float *scores,
                      float *conv) {
    const md_attn_args *a = tk->a;
    const md_config *c = a->cfg;
    const int dk = c->head_dim_k, dv = c->head_dim_v;
    const int g = w->j1 - w->j0, h0 = w->kvh * (c->n_head / c->n_head_kv) + w->j0;
    const int64_t koff = (int64_t)w->kvh * dk, voff = (int64_t)w->kvh * dv;
    int64_t n;
    const md_kv_iter from = item_keys(a, w, &n);
    const float *q = a->q + (w->t * c->n_head + h0) * dk;
    const bool pf = from.to_float == NULL;
    /* the prefetch runs a block ahead: pk over the keys, pv over the values */
    ahead pa = {.nb = 0};
    md_kv_iter pk = from, pv = from;
    int64_t lk = n, lv = n;
    if (pf) {
        ahead_set(&pa, &pk, false, koff, dk, &lk);
        if (warm) pa.done = pa.nb;
        ahead_upto(&pa, pa.nb);
    }
    const float *rb[KEY_BLOCK];
    md_kv_iter it = from;
    for (int64_t i = 0; i < n; i += KEY_BLOCK) {
        const int64_t nb = n - i < KEY_BLOCK ? n - i : KEY_BLOCK;
        md_kv_iter_keys(&it, koff, dk, nb, rb, conv);
        if (pf) {
            ahead_upto(&pa, pa.nb);
            if (lk > 0)
                ahead_set(&pa, &pk, false, koff, dk, &lk);
            else
                ahead_set(&pa, &pv, true, voff, dv, &lv);
        }
        for (int64_t r = 0; r < nb; r += SUB_BLOCK) {
            const int64_t m = nb - r < SUB_BLOCK ? nb - r : SUB_BLOCK;
            if (pf) ahead_upto(&pa, pa.nb * (r + m) / nb);
            tk->vec->dots(q, g, rb + r, m, dk, c->kq_scale, scores + i + r, n);
        }
    }
    for (int j = 0; j < g; j++)
        tk->vec->softmax(scores + j * n, n, a->sinks ? &a->sinks[h0 + j] : NULL);
    float *out = a->out + (w->t * c->n_head + h0) * dv;
    memset(out, 0, (size_t)g * dv * sizeof *out);
    it = from;
    for (int64_t i = 0; i < n; i += KEY_BLOCK) {
        const int64_t nb = n - i < KEY_BLOCK ? n - i : KEY_BLOCK;
        md_kv_iter_values(&it, voff, dv, nb, rb, conv);
        if (pf) {
            ahead_upto(&pa, pa.nb);
            pa.nb = 0;
            if (lv > 0) {
                ahead_set(&pa, &pv, true, voff, dv, &lv);
            } else if (next) {
                int64_t nn;
                md_kv_iter nk = item_keys(a, next, &nn);
                ahead_set(&pa, &nk, false, (int64_t)next->kvh * dk, dk, &nn);
            }
        }
        for (int64_t r = 0; r < nb; r += SUB_BLOCK) {
            const int64_t m = nb - r < SUB_BLOCK ? nb - r : SUB_BLOCK;
            if (pf) ahead_upto(&pa, pa.nb * (r + m) / nb);
            tk->vec->wsums(out, g, rb + r, m, dv, scores + i + r, n);
        }
    }
    if (pf) ahead_upto(&pa, pa.nb);
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

/* Item i of per-row hk · chunks: row, KV head, chunk of its query heads. */
static item item_of(int64_t i, int hk, int g, int chunks) {
    const int64_t pair = i / chunks;
    const int ch = (int)(i % chunks);
    return (item){pair / hk, (int)(pair % hk), g * ch / chunks, g * (ch + 1) / chunks};
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
    item cur = {0}, nxt = {0};
    for (int64_t i = lo; i < hi; i++) {
        if (i == lo) cur = item_of(i, hk, g, chunks);
        if (i + 1 < hi) nxt = item_of(i + 1, hk, g, chunks);
        one_group(tk, &cur, i > lo, i + 1 < hi ? &nxt : NULL, scores, conv);
        cur = nxt;
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
