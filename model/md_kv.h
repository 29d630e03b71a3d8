/* model/md_kv.h — the KV cache: per sequence and layer, K and V rows indexed by position
 * (K: n_head_kv·head_dim_k floats, V: n_head_kv·head_dim_v). Memory grows by doubling up to the
 * context size, so steady decoding does not allocate. */
#ifndef MD_KV_H
#define MD_KV_H

#include <stdint.h>

#include "model/md_config.h"
#include "model/md_model.h"
#include "util/mw_err.h"

typedef struct md_kv_seq {
    int64_t n;      /* positions held (committed) */
    int64_t cap;    /* positions allocated */
    float **k, **v; /* per layer */
} md_kv_seq;

typedef struct md_kv {
    int n_layer, n_seq;
    int64_t n_ctx;
    int64_t kd, vd; /* floats per position */
    md_kv_seq *seqs;
} md_kv;

int md_kv_init(md_kv *kv, const md_config *cfg, int n_seq, int64_t n_ctx, mw_err *err);
void md_kv_free(md_kv *kv);
/* Makes room for every row's position (rows already validated). */
int md_kv_reserve(md_kv *kv, const md_row *rows, int64_t T, mw_err *err);
/* Writes row t's K (T × kd) and V (T × vd) at its sequence and position for one layer. */
void md_kv_store(md_kv *kv, int layer, const md_row *rows, int64_t T, const float *k,
                 const float *v);
/* After a successful pass: each sequence holds up to its last row's position. */
void md_kv_commit(md_kv *kv, const md_row *rows, int64_t T);

static inline const float *md_kv_k(const md_kv *kv, int seq, int layer, int64_t pos) {
    return kv->seqs[seq].k[layer] + pos * kv->kd;
}
static inline const float *md_kv_v(const md_kv *kv, int seq, int layer, int64_t pos) {
    return kv->seqs[seq].v[layer] + pos * kv->vd;
}

#endif
