/* model/md_kda.c — KDA's arithmetic (FORMATS.md §8, §9): the causal convolution, the L2 norm, the
 * decay gate, and the gated delta rule in position-aligned chunks.
 *
 * The recurrence per head, with S[i][j] (key index i, value index j) and a position's log decay g,
 * key k, value v, query q and beta b:
 *     S = diag(exp g) S;  delta = b (v - S^T k);  S += k delta^T;  o = S^T q / sqrt(d).
 * Inside a chunk that started from S0, with G_t = exp(g_0 + ... + g_t) (channel-wise) and
 * K~_r(t) = k_r * exp(g_{r+1}) * ... * exp(g_t), the same quantities are
 *     delta_t = b_t (v_t - S0^T (G_t k_t) - sum_{r<t} (k_t . K~_r(t)) delta_r)
 *     o_t     = (S0^T (G_t q_t) + sum_{r<=t} (q_t . K~_r(t)) delta_r) / sqrt(d)
 *     S_next  = diag(G_{C-1}) S0 + sum_r K~_r(C-1) delta_r^T.
 * Every product is formed in one fixed order from the chunk's own entries: the decay products by
 * successive multiplications, the dot products and weighted sums by md_vec's (the same bits on
 * every ISA), so a position's result does not depend on which pass computed it. */
#include "model/md_kda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_exp.h"
#include "model/md_ops.h"

#define C MD_KDA_CHUNK

/* ---- the element-wise parts ------------------------------------------------------------------ */

static inline float sigmoid(float x) {
    return 1.0f / (1.0f + kn_expf(-x));
}

static inline float silu(float x) {
    return x / (1.0f + kn_expf(-x));
}

void md_kda_sigmoid(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = sigmoid(x[i]);
}

void md_kda_l2norm(float *x, int64_t T, int H, int d, float eps) {
    const md_vec *vec = md_vec_active();
    for (int64_t r = 0; r < T * H; r++) {
        float *v = x + r * d, ss;
        const float *vp = v;
        vec->dots(v, 1, &vp, 1, d, 1.0f, &ss, 1);
        const float scale = 1.0f / fmaxf(sqrtf(ss), eps);
        for (int i = 0; i < d; i++) v[i] *= scale;
    }
}

/* ggml's softplus: z itself above 20, where ln(1 + e^z) is z in float anyway */
static inline float softplus(float z) {
    return z > 20.0f ? z : logf(1.0f + kn_expf(z));
}

void md_kda_decay(const md_kda *k, float *f, const float *dt_bias, const float *a, int64_t T) {
    const int d = k->head_dim;
    const int64_t D = (int64_t)k->n_head * d;
    for (int64_t t = 0; t < T; t++) {
        float *row = f + t * D;
        for (int64_t c = 0; c < D; c++) {
            const float z = row[c] + dt_bias[c], ah = a[c / d];
            /* a = -exp(A_log): the bounded form's exp(A_log) · z is -(a · z) */
            row[c] = k->lower_bound ? k->gate_lb * sigmoid(-(ah * z)) : ah * softplus(z);
        }
    }
}

void md_kda_out_norm(float *o, const float *w, int64_t T, int H, int d, float eps) {
    for (int64_t r = 0; r < T * H; r++) md_rmsnorm(o + r * d, o + r * d, w, d, eps);
}

/* ---- the convolution --------------------------------------------------------------------------
 */

/* The projection a sequence fed at position p (its rows from base on are in the batch, the
 * K - 1 before in its committed inputs, nothing before 0). */
static const float *conv_input(const md_kda_state *st, const md_kda_group *g, const float *x,
                               const float *old, int64_t p) {
    if (p < 0) return NULL;
    if (p >= g->base) return x + (int64_t)st->kv->order[g->first + p - g->base] * st->D;
    return old + (p - (g->base - (st->K - 1))) * st->D;
}

/* One sequence's rows of one projection: the new inputs kept first, then the outputs from the
 * last position down, so each position still reads the raw inputs before it. */
static void conv_group(const md_kda_state *st, const md_kda_group *g, float *x, const float *w,
                       const float *old, float *keep) {
    const int K = st->K;
    const int64_t D = st->D, end = g->base + g->n;
    for (int j = 0; j < K - 1; j++) {
        const float *in = conv_input(st, g, x, old, end - (K - 1) + j);
        if (in)
            memcpy(keep + j * D, in, (size_t)D * sizeof(float));
        else
            memset(keep + j * D, 0, (size_t)D * sizeof(float));
    }
    /* the current position's tap first: its output overwrites that input */
    const float *wl = w + (int64_t)(K - 1) * D;
    for (int64_t p = end - 1; p >= g->base; p--) {
        float *out = x + (int64_t)st->kv->order[g->first + p - g->base] * D;
        for (int64_t c = 0; c < D; c++) out[c] = wl[c] * out[c];
        for (int j = 0; j < K - 1; j++) {
            const float *in = conv_input(st, g, x, old, p - (K - 1) + j), *wj = w + j * D;
            if (in)
                for (int64_t c = 0; c < D; c++) out[c] = out[c] + wj[c] * in[c];
        }
        for (int64_t c = 0; c < D; c++) out[c] = silu(out[c]);
    }
}

void md_kda_conv(md_kda_state *st, int layer, float *const qkv[3], const float *const w[3]) {
    const size_t block = (size_t)(st->K - 1) * (size_t)st->D;
    for (int64_t i = 0; i < st->n_groups; i++) {
        const md_kda_group *g = &st->groups[i];
        const float *old = g->base > 0 ? md__kda_at(st, &g->in, 2, layer) : NULL;
        float *keep = md__kda_at(st, &g->out, 2, layer);
        for (int x = 0; x < 3; x++)
            conv_group(st, g, qkv[x], w[x], old ? old + x * block : NULL, keep + x * block);
    }
}

/* ---- the delta rule -------------------------------------------------------------------------- */

/* One thread's scratch: row pointers (S's rows, the chain's, the deltas'), then the chain K~
 * (C × d), the decays G_t (C × d), the vectors S0^T reads (G_t k_t, G_t q_t: 2C × d) and what it
 * returns (2C × d), the dot products, a fold column and one output row. */
typedef struct ws {
    const float **srow, **krow, **urow;
    float *kc, *gm, *av, *bv, *dots, *col;
} ws;

static ws ws_at(float *base, int d) {
    ws w;
    const float **p = (const float **)(void *)base;
    w.srow = p;
    w.krow = p + d;
    w.urow = p + d + C;
    float *f = base + 2 * ((size_t)d + 2 * C);
    const size_t cd = (size_t)C * (size_t)d;
    w.kc = f;
    w.gm = f + cd;
    w.av = f + 2 * cd;
    w.bv = f + 4 * cd;
    w.dots = f + 6 * cd;
    w.col = w.dots + C;
    for (int r = 0; r < C; r++) w.krow[r] = w.kc + (size_t)r * d;
    return w;
}

/* An entry's parts (from a const bank too: the committed entries are only read). */
static inline float *ent_k(const float *E, int d, int r) {
    return (float *)E + (size_t)r * md__kda_entry(d);
}
static inline float *ent_u(const float *E, int d, int r) {
    return ent_k(E, d, r) + d;
}
static inline float *ent_e(const float *E, int d, int r) {
    return ent_k(E, d, r) + 2 * d;
}

/* Position r of the chunk joins the chain: every earlier key decays by its factor, G advances
 * (from gprev, NULL at the chunk's start), and its own key enters undecayed. */
static void chain_step(const ws *w, int d, int r, const float *e, const float *k,
                       const float *gprev, float *g) {
    for (int p = 0; p < r; p++)
        for (int i = 0; i < d; i++) w->kc[(size_t)p * d + i] *= e[i];
    for (int i = 0; i < d; i++) g[i] = gprev ? gprev[i] * e[i] : e[i];
    memcpy(w->kc + (size_t)r * d, k, (size_t)d * sizeof(float));
}

/* The chain and G after the chunk's first n entries, from the entries themselves. */
static void chain_rebuild(const ws *w, int d, const float *E, int n) {
    for (int r = 0; r < n; r++) {
        chain_step(w, d, r, ent_e(E, d, r), ent_k(E, d, r), r ? w->gm + (size_t)(r - 1) * d : NULL,
                   w->gm + (size_t)r * d);
        w->urow[r] = ent_u(E, d, r);
    }
}

/* S_next = diag(G_{n-1}) S0 + sum_{r<n} K~_r delta_r^T, row by row (out may be S0). */
static void fold(const ws *w, int d, const float *S0, int n, float *out) {
    const md_vec *vec = md_vec_active();
    const float *G = w->gm + (size_t)(n - 1) * d;
    for (int i = 0; i < d; i++) {
        float *row = out + (size_t)i * d;
        const float *in = S0 + (size_t)i * d;
        for (int j = 0; j < d; j++) row[j] = G[i] * in[j];
        for (int r = 0; r < n; r++) w->col[r] = w->kc[(size_t)r * d + i];
        vec->wsums(row, 1, w->urow, n, d, w->col, n);
    }
}

static void materialize(int d, const float *S0, const float *E, int n, float *out, float *scratch) {
    if (n == 0) {
        memcpy(out, S0, (size_t)d * d * sizeof(float));
        return;
    }
    const ws w = ws_at(scratch, d);
    chain_rebuild(&w, d, E, n);
    fold(&w, d, S0, n, out);
}

/* What one (sequence, head) reads and writes for a run of its positions. */
typedef struct head_io {
    const md_kda_state *st;
    const md_kda_group *g;
    int h;
    const float *q, *k, *v, *gl, *beta;
    float *out;
} head_io;

/* Batch row of the sequence's i-th row of the pass, and head h's d values in a T × D array. */
static inline int64_t io_row(const head_io *io, int64_t i) {
    return io->st->kv->order[io->g->first + i];
}
static inline const float *io_at(const head_io *io, const float *x, int64_t i) {
    return x + io_row(io, i) * io->st->D + (int64_t)io->h * io->st->d;
}

/* Chunk positions [j0, j0 + m) of the sequence's rows from i0 on: the decays and S0's reads of
 * the whole run first (one pass over S0), then each position's delta and output in order. */
static void segment(const head_io *io, const ws *w, const float *S0, float *E, int j0, int m,
                    int64_t i0) {
    const int d = io->st->d;
    const md_vec *vec = md_vec_active();
    for (int t = j0; t < j0 + m; t++) {
        const float *gl = io_at(io, io->gl, i0 + t - j0), *k = io_at(io, io->k, i0 + t - j0);
        const float *q = io_at(io, io->q, i0 + t - j0),
                    *gp = t ? w->gm + (size_t)(t - 1) * d : NULL;
        float *e = ent_e(E, d, t), *G = w->gm + (size_t)t * d;
        for (int i = 0; i < d; i++) e[i] = kn_expf(gl[i]);
        for (int i = 0; i < d; i++) G[i] = gp ? gp[i] * e[i] : e[i];
        float *a = w->av + (size_t)(2 * (t - j0)) * d;
        for (int i = 0; i < d; i++) a[i] = G[i] * k[i], a[d + i] = G[i] * q[i];
        memcpy(ent_k(E, d, t), k, (size_t)d * sizeof(float));
    }
    memset(w->bv, 0, (size_t)(2 * m) * d * sizeof(float));
    vec->wsums(w->bv, 2 * m, w->srow, d, d, w->av, d);
    const float scale = 1.0f / sqrtf((float)d);
    for (int t = j0; t < j0 + m; t++) {
        const int64_t i = i0 + t - j0;
        const float *k = io_at(io, io->k, i), *q = io_at(io, io->q, i), *v = io_at(io, io->v, i);
        const float b = io->beta[io_row(io, i) * io->st->H + io->h];
        float *y = w->bv + (size_t)(2 * (t - j0)) * d, *u = ent_u(E, d, t);
        for (int p = 0; p < t; p++)
            for (int c = 0; c < d; c++) w->kc[(size_t)p * d + c] *= ent_e(E, d, t)[c];
        vec->dots(k, 1, w->krow, t, d, 1.0f, w->dots, t);
        vec->wsums(y, 1, w->urow, t, d, w->dots, t);
        for (int c = 0; c < d; c++) u[c] = b * (v[c] - y[c]);
        w->urow[t] = u;
        memcpy(w->kc + (size_t)t * d, k, (size_t)d * sizeof(float));
        vec->dots(q, 1, w->krow, t + 1, d, 1.0f, w->dots, t + 1);
        float *o = y + d;
        vec->wsums(o, 1, w->urow, t + 1, d, w->dots, t + 1);
        float *dst = io->out + io_row(io, i) * io->st->D + (int64_t)io->h * d;
        for (int c = 0; c < d; c++) dst[c] = o[c] * scale;
    }
}

/* One (sequence, head) through all its rows of the pass: chunk by chunk from its start state (the
 * committed one, or what an earlier lane's rows of the step left), the first open chunk's entries
 * appended to the start state's (past what it holds), a chunk completed in the pass folded into
 * the out place, later chunks' entries there too. */
static void scan_head(const head_io *io, int layer, float *scratch) {
    const md_kda_state *st = io->st;
    const int d = st->d;
    const size_t hs = (size_t)io->h * d * d, he = (size_t)io->h * C * md__kda_entry(d);
    const float *S = md__kda_at(st, &io->g->in, 0, layer) + hs;
    float *E = md__kda_at(st, &io->g->in, 1, layer) + he;
    float *S_next = md__kda_at(st, &io->g->out, 0, layer) + hs;
    float *E_next = md__kda_at(st, &io->g->out, 1, layer) + he;
    const ws w = ws_at(scratch, d);
    int64_t pos = io->g->base, i = 0;
    chain_rebuild(&w, d, E, (int)(pos % C));
    while (i < io->g->n) {
        const int j0 = (int)(pos % C);
        const int m = io->g->n - i < C - j0 ? (int)(io->g->n - i) : C - j0;
        for (int r = 0; r < d; r++) w.srow[r] = S + (size_t)r * d;
        segment(io, &w, S, E, j0, m, i);
        if (j0 + m == C) {
            fold(&w, d, S, C, S_next);
            S = S_next;
            E = E_next;
        }
        i += m;
        pos += m;
    }
}

typedef struct scan_task {
    md_kda_state *st;
    int layer;
    const float *q, *k, *v, *g, *beta;
    float *out;
} scan_task;

/* A (sequence, head) item's cost: its rows, plus a chunk's worth for what every item does. */
static int64_t item_cost(const md_kda_state *st, int64_t item) {
    return st->groups[item / st->H].n + C;
}

static void scan_run(void *arg, int ith, int nth) {
    const scan_task *tk = arg;
    md_kda_state *st = tk->st;
    const int64_t items = st->n_groups * st->H;
    int64_t total = 0;
    for (int64_t i = 0; i < items; i++) total += item_cost(st, i);
    int64_t lo = 0, hi = 0, sum = 0;
    const int64_t from = total * ith / nth, to = total * (ith + 1) / nth;
    /* items whose cost starts in [from, to) are this thread's */
    for (int64_t i = 0; i < items; i++) {
        if (sum < from) lo = i + 1;
        if (sum < to) hi = i + 1;
        sum += item_cost(st, i);
    }
    float *scratch = kn_slot(st->scratch, st->slot_bytes, ith);
    for (int64_t i = lo; i < hi; i++) {
        const head_io io = {
            st,     &st->groups[i / st->H], (int)(i % st->H), tk->q, tk->k, tk->v, tk->g, tk->beta,
            tk->out};
        scan_head(&io, tk->layer, scratch);
    }
}

void md_kda_scan(md_kda_state *st, int layer, const float *q, const float *k, const float *v,
                 const float *g, const float *beta, float *out, kn_pool *pool) {
    scan_task tk = {st, layer, q, k, v, g, beta, out};
    kn_pool_run(pool, scan_run, &tk);
}

/* ---- reading a sequence's state ----------------------------------------------------------- */

int md_kda_state_read(const md_kda_state *st, int seq, int64_t held, int layer, float *S,
                      mw_err *err) {
    if (seq < 0 || seq >= st->n_seq || layer < 0 || layer >= st->n_layer || st->slot[layer] < 0)
        return mw_errf(err, "KDA state: no sequence %d / KDA layer %d", seq, layer);
    const md_kda_seq *q = &st->seqs[seq];
    if (!q->mem || held == 0) {
        memset(S, 0, st->s_len * sizeof(float));
        return 0;
    }
    const float *s0 = md__kda_s(st, seq, layer, q->bank);
    const float *e = md__kda_e(st, seq, layer, q->bank);
    const int n = (int)(held % MD_KDA_CHUNK);
    const size_t per_head = (size_t)st->d * (size_t)st->d;
    float *scratch = malloc(md__kda_scratch_floats(st->d) * sizeof(float));
    if (!scratch) return mw_errf(err, "KDA state: out of memory");
    for (int h = 0; h < st->H; h++)
        materialize(st->d, s0 + h * per_head, e + (size_t)h * MD_KDA_CHUNK * md__kda_entry(st->d),
                    n, S + h * per_head, scratch);
    free(scratch);
    return 0;
}
