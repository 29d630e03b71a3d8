/* model/md_kv.c — KV cache storage and growth. */
#include "model/md_kv.h"

#include <stdlib.h>
#include <string.h>

int md_kv_init(md_kv *kv, const md_config *cfg, int n_seq, int64_t n_ctx, mw_err *err) {
    memset(kv, 0, sizeof *kv);
    kv->n_layer = cfg->n_layer;
    kv->n_seq = n_seq;
    kv->n_ctx = n_ctx;
    kv->kd = (int64_t)cfg->n_head_kv * cfg->head_dim_k;
    kv->vd = (int64_t)cfg->n_head_kv * cfg->head_dim_v;
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    if (!kv->seqs) return mw_errf(err, "KV cache: out of memory");
    for (int s = 0; s < n_seq; s++) {
        kv->seqs[s].k = calloc((size_t)kv->n_layer, sizeof(float *));
        kv->seqs[s].v = calloc((size_t)kv->n_layer, sizeof(float *));
        if (!kv->seqs[s].k || !kv->seqs[s].v) {
            md_kv_free(kv);
            return mw_errf(err, "KV cache: out of memory");
        }
    }
    return 0;
}

void md_kv_free(md_kv *kv) {
    for (int s = 0; kv->seqs && s < kv->n_seq; s++) {
        for (int l = 0; l < kv->n_layer; l++) {
            if (kv->seqs[s].k) free(kv->seqs[s].k[l]);
            if (kv->seqs[s].v) free(kv->seqs[s].v[l]);
        }
        free(kv->seqs[s].k);
        free(kv->seqs[s].v);
    }
    free(kv->seqs);
    kv->seqs = NULL;
}

static int grow_seq(md_kv *kv, md_kv_seq *s, int64_t need, mw_err *err) {
    int64_t cap = s->cap ? s->cap : 64;
    while (cap < need) cap *= 2;
    if (cap > kv->n_ctx) cap = kv->n_ctx;
    for (int l = 0; l < kv->n_layer; l++) {
        float *k = realloc(s->k[l], (size_t)(cap * kv->kd) * sizeof(float));
        if (!k) return mw_errf(err, "KV cache: out of memory for %lld positions", (long long)cap);
        s->k[l] = k;
        float *v = realloc(s->v[l], (size_t)(cap * kv->vd) * sizeof(float));
        if (!v) return mw_errf(err, "KV cache: out of memory for %lld positions", (long long)cap);
        s->v[l] = v;
    }
    s->cap = cap;
    return 0;
}

int md_kv_reserve(md_kv *kv, const md_row *rows, int64_t T, mw_err *err) {
    for (int64_t t = 0; t < T; t++) {
        md_kv_seq *s = &kv->seqs[rows[t].seq];
        if (rows[t].pos >= s->cap && grow_seq(kv, s, (int64_t)rows[t].pos + 1, err)) return -1;
    }
    return 0;
}

void md_kv_store(md_kv *kv, int layer, const md_row *rows, int64_t T, const float *k,
                 const float *v) {
    for (int64_t t = 0; t < T; t++) {
        md_kv_seq *s = &kv->seqs[rows[t].seq];
        memcpy(s->k[layer] + rows[t].pos * kv->kd, k + t * kv->kd, (size_t)kv->kd * sizeof(float));
        memcpy(s->v[layer] + rows[t].pos * kv->vd, v + t * kv->vd, (size_t)kv->vd * sizeof(float));
    }
}

void md_kv_commit(md_kv *kv, const md_row *rows, int64_t T) {
    for (int64_t t = 0; t < T; t++) {
        md_kv_seq *s = &kv->seqs[rows[t].seq];
        if (rows[t].pos + 1 > s->n) s->n = rows[t].pos + 1;
    }
}
