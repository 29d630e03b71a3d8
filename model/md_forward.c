/* model/md_forward.c — the forward pass: embedding → layers (attention with a KV cache, MoE
 * through the expert backend) → final norm → LM head, for a batch of (sequence, position, token)
 * rows. There is one layer loop; prefill and decode differ only in the batch they pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_attn.h"
#include "model/md_model.h"
#include "model/md_ops.h"
#include "model/md_rope.h"
#include "model/md_router.h"

#define MAX_BATCH (1 << 20)

static const char *const probe_names[MD_PROBE_COUNT] = {
    "attn_norm",    "Qcur_normed",     "Kcur_normed", "Qcur",     "Kcur",           "Vcur",
    "kqv_out",      "attn_out",        "ffn_inp",     "ffn_norm", "ffn_moe_logits", "ffn_moe_probs",
    "ffn_moe_topk", "ffn_moe_weights", "ffn_moe_out", "l_out",    "result_norm",
};

const char *md_probe_name(md_probe p) {
    return (unsigned)p < MD_PROBE_COUNT ? probe_names[p] : "unknown";
}

struct md_ctx {
    const md_model *m;
    md_ctx_params p;
    int64_t n_ctx;
    md_kv kv;
    md_observer_fn obs;
    void *obs_ud;
    int64_t *seq_rows; /* per sequence: rows of it seen so far in the batch being checked */
    /* scratch for up to T_cap rows */
    int64_t T_cap;
    float *x, *xn, *q, *k, *v, *att, *o, *moe;
    float *rlog, *rw, *cs, *cs_swa;
    int32_t *rids;
    bool rope_differs; /* sliding-window layers use other RoPE parameters */
    md_attn_ws attn;
    uint64_t dense_bytes;
};

/* ---- context -------------------------------------------------------------------------------- */

int md_ctx_new(const md_model *m, const md_ctx_params *p, md_ctx **out, mw_err *err) {
    *out = NULL;
    if (!p->experts) return mw_errf(err, "model context: no expert backend");
    if (p->numerics != KN_NUM_F32 && p->numerics != KN_NUM_Q8)
        return mw_errf(err, "model context: unknown numerics %d", (int)p->numerics);
    const md_config *c = &m->cfg;
    int n_seq = p->n_seq > 0 ? p->n_seq : 1;
    int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : c->n_ctx_train;
    if (n_seq > 1 << 16 || n_ctx > c->n_ctx_train)
        return mw_errf(err,
                       "model context: %d sequences of %lld positions exceed the limits "
                       "(65536, context_length %lld)",
                       n_seq, (long long)n_ctx, (long long)c->n_ctx_train);
    md_ctx *x = calloc(1, sizeof *x);
    if (!x) return mw_errf(err, "out of memory");
    x->m = m;
    x->p = *p;
    x->p.n_seq = n_seq;
    x->n_ctx = n_ctx;
    x->rope_differs = memcmp(&c->rope, &c->rope_swa, sizeof c->rope) != 0;
    x->seq_rows = calloc((size_t)n_seq, sizeof *x->seq_rows);
    if (!x->seq_rows || md_kv_init(&x->kv, c, n_seq, n_ctx, !p->swa_full, err)) {
        md_ctx_free(x);
        return mw_errf(err, "model context: out of memory");
    }
    *out = x;
    return 0;
}

static void free_scratch(md_ctx *c) {
    float **bufs[] = {&c->x, &c->xn,  &c->q,    &c->k,  &c->v,  &c->att,
                      &c->o, &c->moe, &c->rlog, &c->rw, &c->cs, &c->cs_swa};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    free(c->rids);
    c->rids = NULL;
}

void md_ctx_free(md_ctx *c) {
    if (!c) return;
    free_scratch(c);
    md_kv_free(&c->kv);
    md_attn_ws_free(&c->attn);
    free(c->seq_rows);
    free(c);
}

void md_ctx_set_observer(md_ctx *c, md_observer_fn fn, void *ud) {
    c->obs = fn;
    c->obs_ud = ud;
}

int64_t md_seq_len(const md_ctx *c, int seq) {
    return seq >= 0 && seq < c->p.n_seq ? c->kv.seqs[seq].n : -1;
}

int md_seq_truncate(md_ctx *c, int seq, int64_t n, mw_err *err) {
    if (seq < 0 || seq >= c->p.n_seq || n < 0)
        return mw_errf(err, "truncate: no sequence %d of %d, or negative length %lld", seq,
                       c->p.n_seq, (long long)n);
    if (!md_kv_can_truncate(&c->kv, seq, n))
        return mw_errf(err,
                       "truncate: sequence %d holds %lld positions; its sliding-window layers keep "
                       "only the last %lld, too few to go back to %lld (0 is always possible)",
                       seq, (long long)c->kv.seqs[seq].n, (long long)c->kv.ring, (long long)n);
    if (n < c->kv.seqs[seq].n) c->kv.seqs[seq].n = n;
    return 0;
}

uint64_t md_ctx_dense_bytes(const md_ctx *c) {
    return c->dense_bytes;
}

uint64_t md_ctx_kv_bytes(const md_ctx *c) {
    return md_kv_bytes(&c->kv);
}

static int reserve_rows(md_ctx *c, int64_t T, mw_err *err) {
    if (T <= c->T_cap) return 0;
    const md_config *m = &c->m->cfg;
    const size_t E = (size_t)m->n_embd;
    const size_t qd = (size_t)m->n_head * m->head_dim_k, kd = (size_t)m->n_head_kv * m->head_dim_k;
    const size_t vd = (size_t)m->n_head_kv * m->head_dim_v, ad = (size_t)m->n_head * m->head_dim_v;
    const size_t rot = (size_t)m->rope.n_rot;
    int64_t cap = c->T_cap ? c->T_cap : 1;
    while (cap < T) cap *= 2;
    free_scratch(c);
    const size_t n = (size_t)cap;
    c->x = malloc(n * E * sizeof(float));
    c->xn = malloc(n * E * sizeof(float));
    c->q = malloc(n * qd * sizeof(float));
    c->k = malloc(n * kd * sizeof(float));
    c->v = malloc(n * vd * sizeof(float));
    c->att = malloc(n * ad * sizeof(float));
    c->o = malloc(n * E * sizeof(float));
    c->moe = malloc(n * E * sizeof(float));
    c->rlog = malloc(n * (size_t)m->n_expert * sizeof(float));
    c->rw = malloc(n * (size_t)m->n_expert_used * sizeof(float));
    c->rids = malloc(n * (size_t)m->n_expert_used * sizeof(int32_t));
    c->cs = malloc(n * rot * sizeof(float));
    c->cs_swa = malloc(n * rot * sizeof(float));
    if (!c->x || !c->xn || !c->q || !c->k || !c->v || !c->att || !c->o || !c->moe || !c->rlog ||
        !c->rw || !c->rids || !c->cs || !c->cs_swa) {
        free_scratch(c);
        c->T_cap = 0;
        return mw_errf(err, "model context: out of memory for a batch of %lld rows", (long long)T);
    }
    c->T_cap = cap;
    return 0;
}

/* ---- the pass ------------------------------------------------------------------------------- */

static void observe(md_ctx *c, int il, md_probe p, const void *data, int64_t rows, int64_t cols) {
    if (c->obs) c->obs(c->obs_ud, il, p, data, rows, cols);
}

/* Y[i] = W[i] · X (+ bias[i]) for n matrices reading the same X, as one kernel call (the input
 * prepared once, one round trip through the pool). */
static void matmuls(md_ctx *c, int n, const kn_mat *const *W, const float *X, int64_t T,
                    float *const *Y, const float *const *bias) {
    kn_matmul_many(W, Y, n, X, T, c->p.numerics, c->p.pool);
    for (int m = 0; m < n; m++) {
        c->dense_bytes += (uint64_t)W[m]->row_bytes * (uint64_t)W[m]->rows;
        if (bias[m])
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < W[m]->rows; i++) Y[m][t * W[m]->rows + i] += bias[m][i];
    }
}

static void matmul(md_ctx *c, const kn_mat *w, const float *X, int64_t T, float *Y,
                   const float *bias) {
    matmuls(c, 1, &w, X, T, &Y, &bias);
}

static void norm_rows(const float *x, float *y, const float *w, int64_t T, int64_t n, float eps) {
    for (int64_t t = 0; t < T; t++) md_rmsnorm(y + t * n, x + t * n, w, n, eps);
}

static void add_rows(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

static int check_row(md_ctx *c, const md_row *row, int64_t r, int64_t *n_out, mw_err *err) {
    if (row->seq < 0 || row->seq >= c->p.n_seq)
        return mw_errf(err, "forward: row %lld names sequence %d (context has %d)", (long long)r,
                       row->seq, c->p.n_seq);
    if (row->token < 0 || row->token >= c->m->cfg.n_vocab)
        return mw_errf(err, "forward: row %lld: token id %d is out of range (vocabulary %lld)",
                       (long long)r, row->token, (long long)c->m->cfg.n_vocab);
    int64_t want = c->kv.seqs[row->seq].n + c->seq_rows[row->seq]++;
    if (row->pos != want)
        return mw_errf(err, "forward: row %lld: sequence %d continues at position %lld, not %d",
                       (long long)r, row->seq, (long long)want, row->pos);
    if (row->pos >= c->n_ctx)
        return mw_errf(err, "forward: sequence %d is full (context %lld positions)", row->seq,
                       (long long)c->n_ctx);
    if (row->logits) (*n_out)++;
    return 0;
}

/* Every row valid and continuing its sequence. The per-sequence counters are zero between calls
 * and reset through the rows, so a step costs O(T) however many sequences the context has. */
static int check_rows(md_ctx *c, const md_row *rows, int64_t T, int64_t *n_out, mw_err *err) {
    if (T < 1 || T > MAX_BATCH)
        return mw_errf(err, "forward: batch of %lld rows (must be 1 .. %d)", (long long)T,
                       MAX_BATCH);
    *n_out = 0;
    int rc = 0;
    int64_t r = 0;
    for (; r < T && !rc; r++) rc = check_row(c, &rows[r], r, n_out, err);
    for (int64_t i = 0; i < r; i++)
        if (rows[i].seq >= 0 && rows[i].seq < c->p.n_seq) c->seq_rows[rows[i].seq] = 0;
    return rc;
}

/* Q/K per-head norm and RoPE, then the K/V rows into their sequences' caches. */
static void qk_prepare(md_ctx *c, int il, const md_row *rows, int64_t T) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    const int Hq = m->n_head, Hk = m->n_head_kv, dk = m->head_dim_k;
    const bool swa = m->layer_swa[il];
    const md_rope *rope = swa ? &m->rope_swa : &m->rope;
    const float *cs = swa && c->rope_differs ? c->cs_swa : c->cs;
    if (m->qk_norm) {
        for (int64_t i = 0; i < T * Hq; i++)
            md_rmsnorm(c->q + i * dk, c->q + i * dk, w->q_norm, dk, m->norm_eps);
        for (int64_t i = 0; i < T * Hk; i++)
            md_rmsnorm(c->k + i * dk, c->k + i * dk, w->k_norm, dk, m->norm_eps);
        observe(c, il, MD_PROBE_Q_NORMED, c->q, T, (int64_t)Hq * dk);
        observe(c, il, MD_PROBE_K_NORMED, c->k, T, (int64_t)Hk * dk);
    }
    for (int64_t t = 0; t < T; t++) {
        const float *a = cs + t * rope->n_rot;
        for (int h = 0; h < Hq; h++) md_rope_apply(rope, a, c->q + (t * Hq + h) * dk);
        for (int h = 0; h < Hk; h++) md_rope_apply(rope, a, c->k + (t * Hk + h) * dk);
    }
    observe(c, il, MD_PROBE_Q_ROPE, c->q, T, (int64_t)Hq * dk);
    observe(c, il, MD_PROBE_K_ROPE, c->k, T, (int64_t)Hk * dk);
    observe(c, il, MD_PROBE_V, c->v, T, (int64_t)Hk * m->head_dim_v);
    md_kv_store(&c->kv, il, c->k, c->v);
}

static int layer(md_ctx *c, int il, const md_row *rows, int64_t T, mw_err *err) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    const int64_t E = m->n_embd;
    const int k = m->n_expert_used;

    norm_rows(c->x, c->xn, w->attn_norm, T, E, m->norm_eps);
    observe(c, il, MD_PROBE_ATTN_NORM, c->xn, T, E);
    const kn_mat *qkv[3] = {&w->wq, &w->wk, &w->wv};
    matmuls(c, 3, qkv, c->xn, T, (float *const[]){c->q, c->k, c->v},
            (const float *const[]){w->bq, w->bk, w->bv});
    qk_prepare(c, il, rows, T);
    md_attn_args aa = {
        .cfg = m,
        .kv = &c->kv,
        .layer = il,
        .rows = rows,
        .T = T,
        .k = c->k,
        .v = c->v,
        .q = c->q,
        .sinks = w->sinks,
        .out = c->att,
    };
    if (md_attention(&aa, &c->attn, c->p.pool, err)) return -1;
    observe(c, il, MD_PROBE_KQV_OUT, c->att, T, (int64_t)m->n_head * m->head_dim_v);
    matmul(c, &w->wo, c->att, T, c->o, w->bo);
    observe(c, il, MD_PROBE_ATTN_OUT, c->o, T, E);
    add_rows(c->x, c->o, T * E);
    observe(c, il, MD_PROBE_FFN_INP, c->x, T, E);

    norm_rows(c->x, c->xn, w->ffn_norm, T, E, m->norm_eps);
    observe(c, il, MD_PROBE_FFN_NORM, c->xn, T, E);
    matmul(c, &w->router, c->xn, T, c->rlog, NULL);
    observe(c, il, MD_PROBE_ROUTER_LOGITS, c->rlog, T, m->n_expert);
    if (w->router_b)
        for (int64_t t = 0; t < T; t++)
            add_rows(c->rlog + t * m->n_expert, w->router_b, m->n_expert);
    md_route(&m->router, c->rlog, NULL, T, m->n_expert, k, c->rlog, c->rids, c->rw);
    observe(c, il, MD_PROBE_ROUTER_SCORES, c->rlog, T, m->n_expert);
    observe(c, il, MD_PROBE_TOPK, c->rids, T, k);
    observe(c, il, MD_PROBE_WEIGHTS, c->rw, T, k);

    md_moe_batch b = {
        .layer = il,
        .T = T,
        .width = E,
        .x = c->xn,
        .k = k,
        .experts = c->rids,
        .weights = c->rw,
        .numerics = c->p.numerics,
    };
    md_expert_backend *be = c->p.experts;
    if (be->run(be, &b, c->moe, err))
        return mw_err_wrap(err, "layer %d experts (%s)", il, be->name);
    observe(c, il, MD_PROBE_MOE_OUT, c->moe, T, E);
    add_rows(c->x, c->moe, T * E);
    observe(c, il, MD_PROBE_L_OUT, c->x, T, E);
    return 0;
}

int md_forward(md_ctx *c, const md_row *rows, int64_t T, float *logits, mw_err *err) {
    const md_model *mod = c->m;
    const md_config *m = &mod->cfg;
    const int64_t E = m->n_embd;
    int64_t n_out = 0;
    if (check_rows(c, rows, T, &n_out, err)) return -1;
    if (n_out && !logits) return mw_errf(err, "forward: logits requested but no output buffer");
    if (reserve_rows(c, T, err) || md_kv_begin(&c->kv, rows, T, err) ||
        md_attn_ws_reserve(&c->attn, m, rows, T, kn_pool_size(c->p.pool), err))
        return -1;

    for (int64_t t = 0; t < T; t++) {
        kn_mat_row(&mod->tok_embd, rows[t].token, c->x + t * E);
        c->dense_bytes += mod->tok_embd.row_bytes;
        md_rope_angles(&m->rope, rows[t].pos, c->cs + t * m->rope.n_rot);
        if (c->rope_differs)
            md_rope_angles(&m->rope_swa, rows[t].pos, c->cs_swa + t * m->rope.n_rot);
    }
    for (int il = 0; il < m->n_layer; il++)
        if (layer(c, il, rows, T, err)) return -1;
    md_kv_commit(&c->kv);

    if (n_out == 0) return 0;
    /* final norm of the rows that want logits, gathered, then the LM head once */
    int64_t j = 0;
    for (int64_t t = 0; t < T; t++)
        if (rows[t].logits)
            md_rmsnorm(c->xn + j++ * E, c->x + t * E, mod->out_norm, E, m->norm_eps);
    observe(c, -1, MD_PROBE_RESULT_NORM, c->xn, n_out, E);
    matmul(c, &mod->output, c->xn, n_out, logits, NULL);
    return 0;
}
