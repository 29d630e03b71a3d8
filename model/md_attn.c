/* model/md_attn.c — the attention of one layer for a batch. Each (row, head) is independent, so
 * the pool splits them into contiguous ranges; a row's result does not depend on the split. */
#include "model/md_attn.h"

#include <stdlib.h>
#include <string.h>

#include "model/md_ops.h"

int md_attn_ws_reserve(md_attn_ws *ws, const md_kv *kv, const md_row *rows, int64_t T,
                       int n_threads, mw_err *err) {
    (void)kv;
    int64_t need = 1;
    for (int64_t t = 0; t < T; t++)
        if (rows[t].pos + 1 > need) need = rows[t].pos + 1;
    if (n_threads < 1) n_threads = 1;
    if (need <= ws->per_thread && n_threads <= ws->n_threads) return 0;
    int64_t per = ws->per_thread > need ? ws->per_thread : need;
    if (per < 2 * ws->per_thread) per = 2 * ws->per_thread; /* amortize growth while decoding */
    int nt = n_threads > ws->n_threads ? n_threads : ws->n_threads;
    float *s = realloc(ws->scores, (size_t)(per * nt) * sizeof(float));
    if (!s) return mw_errf(err, "attention: out of memory for %lld positions", (long long)per);
    ws->scores = s;
    ws->per_thread = per;
    ws->n_threads = nt;
    return 0;
}

void md_attn_ws_free(md_attn_ws *ws) {
    free(ws->scores);
    memset(ws, 0, sizeof *ws);
}

typedef struct task {
    const md_attn_args *a;
    md_attn_ws *ws;
} task;

static void one_head(const md_attn_args *a, int64_t t, int h, float *scores) {
    const md_config *c = a->cfg;
    const int dk = c->head_dim_k, dv = c->head_dim_v;
    const int kvh = h / (c->n_head / c->n_head_kv);
    const int64_t pos = a->rows[t].pos;
    int64_t t0 = 0;
    if (c->layer_swa[a->layer] && pos - c->n_swa + 1 > 0) t0 = pos - c->n_swa + 1;
    const int64_t n = pos - t0 + 1;
    const float *q = a->q + (t * c->n_head + h) * dk;
    const md_kv_iter from = md_kv_iter_at(a->kv, a->layer, t, t0, a->k, a->v);
    const float *k, *v;
    md_kv_iter it = from;
    for (int64_t i = 0; i < n; i++) {
        md_kv_iter_next(&it, &k, &v);
        scores[i] = md_dot(q, k + (int64_t)kvh * dk, dk) * c->kq_scale;
    }
    md_softmax(scores, n, a->sinks ? &a->sinks[h] : NULL);
    float *out = a->out + (t * c->n_head + h) * dv;
    memset(out, 0, (size_t)dv * sizeof *out);
    it = from;
    for (int64_t i = 0; i < n; i++) {
        md_kv_iter_next(&it, &k, &v);
        v += (int64_t)kvh * dv;
        const float p = scores[i];
        for (int d = 0; d < dv; d++) out[d] += p * v[d];
    }
}

static void run(void *arg, int ith, int nth) {
    const task *tk = arg;
    const md_attn_args *a = tk->a;
    const int64_t items = a->T * a->cfg->n_head;
    const int64_t lo = items * ith / nth, hi = items * (ith + 1) / nth;
    float *scores = tk->ws->scores + (int64_t)ith * tk->ws->per_thread;
    for (int64_t i = lo; i < hi; i++)
        one_head(a, i / a->cfg->n_head, (int)(i % a->cfg->n_head), scores);
}

int md_attention(const md_attn_args *a, md_attn_ws *ws, kn_pool *pool, mw_err *err) {
    if (kn_pool_size(pool) > ws->n_threads)
        return mw_errf(err, "attention: scratch reserved for %d threads, pool has %d",
                       ws->n_threads, kn_pool_size(pool));
    task tk = {a, ws};
    kn_pool_run(pool, run, &tk);
    return 0;
}
