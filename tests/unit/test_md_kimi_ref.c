/* tests/unit/test_md_kimi_ref.c — the Kimi line on models of other shapes than the fixtures', from
 * `vindex synth`, against an independent float64 evaluation of FORMATS.md §8 written here: KDA as
 * the plain token-by-token recurrence (not the chunked form the model runs), latent attention
 * decompressed per head and without rotation, DeepSeek-V3's routing, dense and shared FFNs. The
 * variants cover what the fixture does not: other head widths and counts, convolutions of 2 and 3
 * taps, other layer patterns (every layer KDA, every other one), no dense layer, softmax gating,
 * several shared experts, Q6_K experts. f32 numerics must agree within 1e-4 at every position of
 * a prompt across three delta-rule chunks, and token-by-token decode gives the prefill's bits. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_local.h"
#include "model/md_model.h"
#include "vindex/vx_synth.h"

#define T_TOK 40

typedef struct variant {
    const char *name;
    int layers, hidden, heads, kda_dim, conv, every;
    int nope, rope, v, kv_lora;
    int experts, top_k, ff, dense_layers, shared, gating;
    float scale;
    const char *expert_format;
    uint64_t seed;
    /* kimi-k3 (k3 set): query rank, experts' latent width, residual block, SiTU's betas, the
     * decay's bound, weight normalisation */
    bool k3;
    int q_lora, latent, res_block;
    float beta, lbeta, lb;
    int norm;
} variant;

static const variant variants[] = {
    /* narrow KDA heads, a 3-tap convolution, latent attention every third layer */
    {"kda32-conv3", 5,       128, 2,     32, 3, 3, 32, 16, 32, 64, 8, 2, 64, 1, 1, 2,
     1.5f,          "mxfp4", 31,  false, 0,  0, 0, 0,  0,  0,  0},
    /* two taps, every other layer latent, no dense layer, softmax gating, two shared experts */
    {"conv2-alternate", 4,  256,   4, 64, 2, 2, 64, 32, 48, 96, 16, 6, 128, 0, 2, 1, 0.0f,
     "mxfp4",           47, false, 0, 0,  0, 0, 0,  0,  0},
    /* KDA only (no latent attention layer at all), narrow heads, Q6_K experts */
    {"kda-only-q6k", 3,      256, 8,     16, 4, 100, 32, 16, 32, 64, 8, 3, 256, 1, 1, 2,
     2.446f,         "q6_K", 59,  false, 0,  0, 0,   0,  0,  0,  0},
    /* K3: latent 96, residual blocks of 2 over 5 layers (a final partial block), q_lora 64 */
    {"k3-latent96", 5,       256, 4,    64, 4,  4, 32,   16,   32,    64, 16, 4, 128, 1, 1, 2,
     2.446f,        "mxfp4", 71,  true, 64, 96, 2, 2.0f, 2.5f, -5.0f, 1},
    /* K3 without a latent or a query rank, blocks of 3, a linear up branch, no normalisation */
    {"k3-plain", 4, 128, 2,    32,      3,  2,    32, 16, 32, 64,   8,    2,     64,
     0,          2, 2,   1.0f, "mxfp4", 83, true, 0,  0,  3,  1.5f, 0.0f, -3.0f, 0},
    /* K3 with the residuals off (block 0), SiTU's up branch capped tightly, softmax gating */
    {"k3-nores", 3, 128, 2,    32,      4,  3,    32, 16, 32, 64,   8,    3,     64,
     1,          1, 1,   2.0f, "mxfp4", 97, true, 32, 64, 0,  3.0f, 0.5f, -8.0f, 1},
};

/* ---- the model file ----------------------------------------------------------------------------
 */

static void synth(const variant *v, const char *path) {
    const struct {
        const char *key;
        int val;
    } ints[] = {{"layers", v->layers},
                {"hidden", v->hidden},
                {"heads", v->heads},
                {"kda-head-dim", v->kda_dim},
                {"conv-kernel", v->conv},
                {"full-attn-every", v->every},
                {"head-dim", v->nope},
                {"rope-dim", v->rope},
                {"v-dim", v->v},
                {"kv-lora", v->kv_lora},
                {"experts", v->experts},
                {"top-k", v->top_k},
                {"expert-ff", v->ff},
                {"dense-layers", v->dense_layers},
                {"shared-experts", v->shared},
                {"gating", v->gating},
                {"vocab", 300}};
    enum { N = sizeof ints / sizeof ints[0] };
    char vals[N + 2][24];
    const char *kv[2 * N + 26];
    int k = 0;
    kv[k++] = "arch", kv[k++] = v->k3 ? "kimi-k3" : "kimi-linear";
    for (int i = 0; i < N; i++) {
        snprintf(vals[i], sizeof vals[i], "%d", ints[i].val);
        kv[k++] = ints[i].key, kv[k++] = vals[i];
    }
    snprintf(vals[N], sizeof vals[N], "%g", (double)v->scale);
    snprintf(vals[N + 1], sizeof vals[N + 1], "%llu", (unsigned long long)v->seed);
    kv[k++] = "weights-scale", kv[k++] = vals[N];
    kv[k++] = "seed", kv[k++] = vals[N + 1];
    kv[k++] = "expert-format", kv[k++] = v->expert_format;
    char k3v[7][24];
    if (v->k3) {
        static const char *const keys[7] = {"q-lora",      "expert-latent",    "attn-res-block",
                                            "situ-beta",   "situ-linear-beta", "gate-lower-bound",
                                            "weights-norm"};
        snprintf(k3v[0], 24, "%d", v->q_lora);
        snprintf(k3v[1], 24, "%d", v->latent);
        snprintf(k3v[2], 24, "%d", v->res_block);
        snprintf(k3v[3], 24, "%g", (double)v->beta);
        snprintf(k3v[4], 24, "%g", (double)v->lbeta);
        snprintf(k3v[5], 24, "%g", (double)v->lb);
        snprintf(k3v[6], 24, "%d", v->norm);
        for (int i = 0; i < 7; i++) kv[k++] = keys[i], kv[k++] = k3v[i];
    }
    kv[k] = NULL;
    vx_input *in;
    mw_err e;
    if (vx_synth_input_kv(kv, &in, &e) || vx_input_write_gguf(in, path, NULL, NULL, &e))
        fail_msg("%s: %s", v->name, e.msg);
    vx_input_close(in);
}

/* ---- the float64 reference ----------------------------------------------------------------------
 */

#define EPS 1e-5

typedef struct ref {
    const variant *v;
    mwt_ref m;
    int T;
    double *x;   /* T × hidden: the residual stream */
    double *h;   /* T × hidden: a layer's normed input */
    double *buf; /* scratch */
} ref;

/* One projection of every token's normed input: out (T × rows). */
static void project(const ref *r, const char *fmt, int l, double *out, int64_t rows) {
    kn_mat W = mwt_ref_tensor(&r->m, fmt, l);
    for (int t = 0; t < r->T; t++)
        mwt_ref_mv(&r->m, &W, 0, rows, r->h + (size_t)t * r->v->hidden, out + (size_t)t * rows);
}

/* The causal convolution of one projection (T × D, in place) with taps w[c·K + j], then SiLU. */
static void conv_silu(const ref *r, double *x, const double *w) {
    const int K = r->v->conv, T = r->T;
    const int64_t D = (int64_t)r->v->heads * r->v->kda_dim;
    double *out = r->buf;
    for (int t = 0; t < T; t++)
        for (int64_t c = 0; c < D; c++) {
            double s = 0;
            for (int j = 0; j < K; j++) {
                const int p = t - (K - 1) + j;
                if (p >= 0) s += w[c * K + j] * x[(size_t)p * D + c];
            }
            out[(size_t)t * D + c] = mwt_ref_silu(s);
        }
    memcpy(x, out, sizeof(double) * (size_t)(T * D));
}

static void l2norm_heads(double *x, int64_t n_vec, int d) {
    for (int64_t i = 0; i < n_vec; i++) {
        double ss = 0;
        for (int j = 0; j < d; j++) ss += x[i * d + j] * x[i * d + j];
        const double s = 1 / fmax(sqrt(ss), EPS);
        for (int j = 0; j < d; j++) x[i * d + j] *= s;
    }
}

/* The delta rule token by token (FORMATS.md §8): per head S = diag(exp g) S; delta = beta (v -
 * S^T k); S += k delta^T; o = S^T q / sqrt(d). */
static void recurrence(const ref *r, const double *q, const double *k, const double *v,
                       const double *g, const double *beta, double *o) {
    const int H = r->v->heads, d = r->v->kda_dim;
    double *S = calloc((size_t)d * d, sizeof *S), delta[1024];
    for (int h = 0; h < H; h++) {
        memset(S, 0, sizeof(double) * (size_t)(d * d));
        for (int t = 0; t < r->T; t++) {
            const size_t at = ((size_t)t * H + h) * d;
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) S[i * d + j] *= exp(g[at + i]);
            for (int j = 0; j < d; j++) {
                double kv = 0;
                for (int i = 0; i < d; i++) kv += S[i * d + j] * k[at + i];
                delta[j] = beta[t * H + h] * (v[at + j] - kv);
            }
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) S[i * d + j] += k[at + i] * delta[j];
            for (int j = 0; j < d; j++) {
                double s = 0;
                for (int i = 0; i < d; i++) s += S[i * d + j] * q[at + i];
                o[at + j] = s / sqrt((double)d);
            }
        }
    }
    free(S);
}

/* A KDA block on every token: the block's output, T × hidden, into out. */
static void kda_block(ref *r, int l, double *out) {
    const variant *v = r->v;
    const int T = r->T, H = v->heads, d = v->kda_dim;
    const int64_t D = (int64_t)H * d, E = v->hidden;
    const size_t n = (size_t)T * D;
    double *q = malloc(sizeof(double) * n * 7), *k = q + n, *vv = k + n, *g = vv + n, *g2 = g + n;
    double *o = g2 + n, *tmp = o + n, beta[T * H], a[H], dt[D], w[D * v->conv], norm[d];
    r->buf = tmp;
    static const char *const conv[3] = {"blk.%d.ssm_conv1d_q.weight", "blk.%d.ssm_conv1d_k.weight",
                                        "blk.%d.ssm_conv1d_v.weight"};
    static const char *const proj[3] = {"blk.%d.attn_q.weight", "blk.%d.attn_k.weight",
                                        "blk.%d.attn_v.weight"};
    double *qkv[3] = {q, k, vv};
    for (int x = 0; x < 3; x++) {
        project(r, proj[x], l, qkv[x], D);
        mwt_ref_vec(&r->m, conv[x], l, D * v->conv, w);
        conv_silu(r, qkv[x], w);
    }
    l2norm_heads(q, (int64_t)T * H, d);
    l2norm_heads(k, (int64_t)T * H, d);
    /* decay g = a · softplus(f_b f_a h + dt), beta, the output gate g_b g_a h */
    double *low = malloc(sizeof(double) * (size_t)T * d);
    project(r, "blk.%d.ssm_f_a.weight", l, low, d);
    kn_mat fb = mwt_ref_tensor(&r->m, "blk.%d.ssm_f_b.weight", l);
    mwt_ref_vec(&r->m, "blk.%d.ssm_dt.bias", l, D, dt);
    mwt_ref_vec(&r->m, "blk.%d.ssm_a", l, H, a);
    for (int t = 0; t < T; t++) {
        mwt_ref_mv(&r->m, &fb, 0, D, low + (size_t)t * d, g + (size_t)t * D);
        for (int64_t c = 0; c < D; c++) {
            const double z = g[t * D + c] + dt[c]; /* K3: bounded, exp(A_log) = -a */
            g[t * D + c] =
                v->k3 ? v->lb * mwt_ref_sigmoid(-a[c / d] * z) : a[c / d] * log1p(exp(z));
        }
    }
    project(r, "blk.%d.ssm_beta.weight", l, beta, H);
    for (int i = 0; i < T * H; i++) beta[i] = mwt_ref_sigmoid(beta[i]);
    if (v->k3) {
        project(r, "blk.%d.ssm_g.weight", l, g2, D);
    } else {
        project(r, "blk.%d.ssm_g_a.weight", l, low, d);
        kn_mat gb = mwt_ref_tensor(&r->m, "blk.%d.ssm_g_b.weight", l);
        for (int t = 0; t < T; t++)
            mwt_ref_mv(&r->m, &gb, 0, D, low + (size_t)t * d, g2 + (size_t)t * D);
    }
    recurrence(r, q, k, vv, g, beta, o);
    mwt_ref_vec(&r->m, "blk.%d.ssm_norm.weight", l, d, norm);
    for (int64_t i = 0; i < (int64_t)T * H; i++) {
        mwt_ref_rmsnorm(o + i * d, d, norm, EPS);
        for (int j = 0; j < d; j++) o[i * d + j] *= mwt_ref_sigmoid(g2[i * d + j]);
    }
    kn_mat wo = mwt_ref_tensor(&r->m, "blk.%d.attn_output.weight", l);
    for (int t = 0; t < T; t++)
        mwt_ref_mv(&r->m, &wo, 0, E, o + (size_t)t * D, out + (size_t)t * E);
    free(low);
    free(q);
}

/* Latent attention without rotation, decompressed per head (FORMATS.md §8, step 4). */
static void mla_block(ref *r, int l, double *out) {
    const variant *v = r->v;
    const int T = r->T, H = v->heads, dq = v->nope + v->rope, R = v->kv_lora;
    const int64_t E = v->hidden;
    double *q = malloc(sizeof(double) * (size_t)T * H * dq),
           *c = malloc(sizeof(double) * T * (R + v->rope));
    double *kn = malloc(sizeof(double) * (size_t)T * H * v->nope),
           *vv = malloc(sizeof(double) * (size_t)T * H * v->v);
    double norm[R], p[T], o[H * v->v];
    if (v->k3 && v->q_lora) { /* q = attn_q_b RMSNorm(attn_q_a h) · attn_q_a_norm */
        double *qa = malloc(sizeof(double) * (size_t)T * v->q_lora), qn[v->q_lora];
        project(r, "blk.%d.attn_q_a.weight", l, qa, v->q_lora);
        mwt_ref_vec(&r->m, "blk.%d.attn_q_a_norm.weight", l, v->q_lora, qn);
        kn_mat qb = mwt_ref_tensor(&r->m, "blk.%d.attn_q_b.weight", l);
        for (int t = 0; t < T; t++) {
            mwt_ref_rmsnorm(qa + (size_t)t * v->q_lora, v->q_lora, qn, EPS);
            mwt_ref_mv(&r->m, &qb, 0, (int64_t)H * dq, qa + (size_t)t * v->q_lora,
                       q + (size_t)t * H * dq);
        }
        free(qa);
    } else {
        project(r, "blk.%d.attn_q.weight", l, q, (int64_t)H * dq);
    }
    double *gate = NULL; /* K3: sigmoid(attn_gate h) on the heads' output */
    if (v->k3) {
        gate = malloc(sizeof(double) * (size_t)T * H * v->v);
        project(r, "blk.%d.attn_gate.weight", l, gate, (int64_t)H * v->v);
    }
    project(r, "blk.%d.attn_kv_a_mqa.weight", l, c, R + v->rope);
    mwt_ref_vec(&r->m, "blk.%d.attn_kv_a_norm.weight", l, R, norm);
    kn_mat kb = mwt_ref_tensor(&r->m, "blk.%d.attn_k_b.weight", l);
    kn_mat vb = mwt_ref_tensor(&r->m, "blk.%d.attn_v_b.weight", l);
    for (int t = 0; t < T; t++) {
        double *ct = c + (size_t)t * (R + v->rope);
        mwt_ref_rmsnorm(ct, R, norm, EPS);
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < v->nope; i++) { /* (K_h^T c)_i */
                double s = 0;
                for (int j = 0; j < R; j++) {
                    kn_mat_row(&kb, (int64_t)h * R + j, r->m.row);
                    s += (double)r->m.row[i] * ct[j];
                }
                kn[((size_t)t * H + h) * v->nope + i] = s;
            }
            mwt_ref_mv(&r->m, &vb, (int64_t)h * v->v, v->v, ct, vv + ((size_t)t * H + h) * v->v);
        }
    }
    kn_mat wo = mwt_ref_tensor(&r->m, "blk.%d.attn_output.weight", l);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) {
            const double *qh = q + ((size_t)t * H + h) * dq;
            double mx = -INFINITY, z = 0;
            for (int u = 0; u <= t; u++) {
                double s = 0;
                for (int i = 0; i < v->nope; i++)
                    s += qh[i] * kn[((size_t)u * H + h) * v->nope + i];
                for (int i = 0; i < v->rope; i++)
                    s += qh[v->nope + i] * c[(size_t)u * (R + v->rope) + R + i];
                p[u] = s / sqrt((double)dq);
                mx = fmax(mx, p[u]);
            }
            for (int u = 0; u <= t; u++) z += (p[u] = exp(p[u] - mx));
            for (int i = 0; i < v->v; i++) {
                double s = 0;
                for (int u = 0; u <= t; u++) s += p[u] / z * vv[((size_t)u * H + h) * v->v + i];
                o[h * v->v + i] = s;
            }
        }
        for (int i = 0; gate && i < H * v->v; i++)
            o[i] *= mwt_ref_sigmoid(gate[(size_t)t * H * v->v + i]);
        mwt_ref_mv(&r->m, &wo, 0, E, o, out + (size_t)t * E);
    }
    free(q), free(c), free(kn), free(vv), free(gate);
}

/* A latent MoE's routed part (K3): z = ffn_routed_down h, the experts at z's width, their
 * weighted sum RMS-normed and up-projected; without a latent the experts read h. */
static void routed(ref *r, int l, const double *h, const int *ids, const double *wt,
                   const mwt_glu *glu, double *acc) {
    const variant *v = r->v;
    const int64_t E = v->hidden, L = v->latent ? v->latent : E;
    double z[L], y[E > L ? E : L], m[L], w[L];
    if (v->latent) {
        kn_mat down = mwt_ref_tensor(&r->m, "blk.%d.ffn_routed_down.weight", l);
        mwt_ref_mv(&r->m, &down, 0, L, h, z);
    } else {
        memcpy(z, h, sizeof z);
    }
    memset(m, 0, sizeof m);
    for (int j = 0; j < v->top_k; j++) {
        kn_expert e;
        mw_err err;
        if (vx_source_expert(r->m.src, l, ids[j], &e, &err)) fail_msg("%s", err.msg);
        mwt_ref_ffn(&r->m, glu, &e.gate, &e.up, &e.down, z, y);
        for (int64_t i = 0; i < L; i++) m[i] += wt[j] * y[i];
    }
    if (!v->latent) {
        for (int64_t i = 0; i < E; i++) acc[i] += m[i];
        return;
    }
    mwt_ref_vec(&r->m, "blk.%d.ffn_routed_norm.weight", l, L, w);
    mwt_ref_rmsnorm(m, L, w, EPS);
    kn_mat up = mwt_ref_tensor(&r->m, "blk.%d.ffn_routed_up.weight", l);
    mwt_ref_mv(&r->m, &up, 0, E, m, y);
    for (int64_t i = 0; i < E; i++) acc[i] += y[i];
}

/* Token t's FFN on its input row `in` (the residual, or K3's mix): dense, or routed + shared
 * (SwiGLU, or K3's SiTU everywhere), added to its residual. */
static void ffn(ref *r, int l, int t, const double *in) {
    const variant *v = r->v;
    const mwt_glu glu = {v->k3 ? v->beta : 0, v->lbeta};
    const int64_t E = v->hidden;
    double h[E], acc[E], y[E], w[E];
    memcpy(h, in, sizeof h);
    mwt_ref_vec(&r->m, "blk.%d.ffn_norm.weight", l, E, w);
    mwt_ref_rmsnorm(h, E, w, EPS);
    memset(acc, 0, sizeof acc);
    if (l < v->dense_layers) {
        kn_mat g = mwt_ref_tensor(&r->m, "blk.%d.ffn_gate.weight", l),
               u = mwt_ref_tensor(&r->m, "blk.%d.ffn_up.weight", l),
               d = mwt_ref_tensor(&r->m, "blk.%d.ffn_down.weight", l);
        mwt_ref_ffn(&r->m, &glu, &g, &u, &d, h, acc);
    } else {
        const mwt_route p = {v->experts, v->top_k, v->gating, !v->k3 || v->norm, v->scale, 1, 1};
        kn_mat router = mwt_ref_tensor(&r->m, "blk.%d.ffn_gate_inp.weight", l);
        double logit[256], bias[256], wt[32];
        int ids[32];
        mwt_ref_mv(&r->m, &router, 0, v->experts, h, logit);
        mwt_ref_vec(&r->m, "blk.%d.exp_probs_b.bias", l, v->experts, bias);
        mwt_ref_route(&p, logit, bias, ids, wt);
        routed(r, l, h, ids, wt, &glu, acc);
        kn_mat g = mwt_ref_tensor(&r->m, "blk.%d.ffn_gate_shexp.weight", l),
               u = mwt_ref_tensor(&r->m, "blk.%d.ffn_up_shexp.weight", l),
               d = mwt_ref_tensor(&r->m, "blk.%d.ffn_down_shexp.weight", l);
        mwt_ref_ffn(&r->m, &glu, &g, &u, &d, h, y);
        for (int64_t i = 0; i < E; i++) acc[i] += y[i];
    }
    for (int64_t i = 0; i < E; i++) r->x[(size_t)t * E + i] += acc[i];
}

/* K3's attention residuals (FORMATS.md §9, step 5): per token a stack of banked vectors. */
typedef struct stack {
    int n, cap;
    double *B; /* T × cap × hidden */
} stack;

/* out = the mix of token t's stack and cur with the score vector `fmt` (cur when nothing is
 * banked): a softmax over sum_i w_i v_i / sqrt(mean(v²) + eps), applied to the raw vectors. */
static void mix(ref *r, const stack *st, const char *fmt, int l, int t, const double *cur,
                double *out) {
    const int64_t E = r->v->hidden;
    if (st->n == 0) {
        memcpy(out, cur, sizeof(double) * (size_t)E);
        return;
    }
    double w[E], p[st->n + 1], mx = -INFINITY, z = 0;
    mwt_ref_vec(&r->m, fmt, l, E, w);
    for (int k = 0; k <= st->n; k++) {
        const double *vk = k < st->n ? st->B + ((size_t)t * st->cap + k) * E : cur;
        double ss = 0, dot = 0;
        for (int64_t i = 0; i < E; i++) ss += vk[i] * vk[i], dot += w[i] * vk[i];
        p[k] = dot / sqrt(ss / (double)E + EPS);
        mx = fmax(mx, p[k]);
    }
    for (int k = 0; k <= st->n; k++) z += (p[k] = exp(p[k] - mx));
    for (int64_t i = 0; i < E; i++) {
        double s = p[st->n] / z * cur[i];
        for (int k = 0; k < st->n; k++) s += p[k] / z * st->B[((size_t)t * st->cap + k) * E + i];
        out[i] = s;
    }
}

/* One layer: the attention block on the normed input (mixed with the banked checkpoints in K3,
 * a checkpoint layer banking its raw input and restarting the running sum), then the FFN. */
static void layer(ref *r, stack *st, int l, double *blk) {
    const variant *v = r->v;
    const int T = r->T;
    const int64_t E = v->hidden;
    double w[E];
    for (int t = 0; t < T; t++)
        mix(r, st, "blk.%d.attn_res_score.weight", l, t, r->x + t * E, r->h + t * E);
    const bool banked = v->k3 && v->res_block && l % v->res_block == 0;
    for (int t = 0; banked && t < T; t++)
        memcpy(st->B + ((size_t)t * st->cap + st->n) * E, r->x + t * E, sizeof w);
    st->n += banked;
    mwt_ref_vec(&r->m, "blk.%d.attn_norm.weight", l, E, w);
    for (int t = 0; t < T; t++) mwt_ref_rmsnorm(r->h + t * E, E, w, EPS);
    if ((l + 1) % v->every != 0)
        kda_block(r, l, blk);
    else
        mla_block(r, l, blk);
    for (int64_t i = 0; i < T * E; i++) r->x[i] = banked ? blk[i] : r->x[i] + blk[i];
    for (int t = 0; t < T; t++) {
        mix(r, st, "blk.%d.ffn_res_score.weight", l, t, r->x + t * E, w);
        ffn(r, l, t, w);
    }
}

/* Logits of T tokens (one sequence from position 0), T × n_vocab. */
static double *reference(const variant *v, const vx_source *src, const int32_t *tok, int T,
                         int64_t V) {
    const int64_t E = v->hidden;
    ref r = {v,
             mwt_ref_open(v->name, src),
             T,
             calloc((size_t)T * E, sizeof(double)),
             malloc(sizeof(double) * (size_t)T * E),
             NULL};
    stack st = {0, v->layers, malloc(sizeof(double) * (size_t)(T * v->layers * E))};
    double *blk = malloc(sizeof(double) * (size_t)T * E), w[E], h[E];
    kn_mat emb = mwt_ref_tensor(&r.m, "token_embd.weight", 0);
    for (int t = 0; t < T; t++) {
        kn_mat_row(&emb, tok[t], r.m.row);
        for (int64_t i = 0; i < E; i++) r.x[t * E + i] = r.m.row[i];
    }
    for (int l = 0; l < v->layers; l++) layer(&r, &st, l, blk);
    double *logits = malloc(sizeof(double) * (size_t)(T * V));
    kn_mat out = mwt_ref_tensor(&r.m, "output.weight", 0);
    mwt_ref_vec(&r.m, "output_norm.weight", 0, E, w);
    for (int t = 0; t < T; t++) {
        mix(&r, &st, "output_res_score.weight", 0, t, r.x + t * E, h);
        mwt_ref_rmsnorm(h, E, w, EPS);
        mwt_ref_mv(&r.m, &out, 0, V, h, logits + t * V);
    }
    mwt_ref_close(&r.m);
    free(r.x), free(r.h), free(blk), free(st.B);
    return logits;
}

/* ---- the checks -------------------------------------------------------------------------------
 */

static void check_variant(const variant *v) {
    char *dir = mwt_tmpdir("kimi-ref");
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, v->name);
    synth(v, path);
    vx_source *src;
    md_model *m;
    md_expert_backend *b;
    mw_err e;
    if (vx_source_open(path, NULL, &src, &e) || md_model_load(src, &m, &e) ||
        md_local_backend_new(src, &m->cfg, NULL, &b, &e))
        fail_msg("%s: %s", v->name, e.msg);
    const int64_t V = m->cfg.n_vocab;
    int32_t tok[T_TOK];
    md_row rows[T_TOK];
    for (int i = 0; i < T_TOK; i++) {
        tok[i] = (int32_t)((i * 97 + v->seed * 13) % 290);
        rows[i] = (md_row){0, i, tok[i], 1};
    }
    md_ctx_params p = {.numerics = KN_NUM_F32, .experts = b, .n_seq = 1, .n_ctx = 64};
    md_ctx *c;
    float *pre = malloc(sizeof(float) * (size_t)(T_TOK * V)), *dec = malloc(sizeof(float) * V);
    if (md_ctx_new(m, &p, &c, &e) || md_forward(c, rows, T_TOK, pre, &e)) fail_msg("%s", e.msg);
    md_ctx_free(c);
    double *want = reference(v, src, tok, T_TOK, V), d = 0;
    for (int64_t i = 0; i < T_TOK * V; i++) d = fmax(d, fabs(pre[i] - want[i]));
    printf("    %-16s f32 vs float64 reference: max |diff| %.3g over %d positions\n", v->name, d,
           T_TOK);
    if (!(d < 1e-4)) fail_msg("%s: max |diff| %.3g against the reference", v->name, d);
    if (md_ctx_new(m, &p, &c, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < T_TOK; i++) {
        if (md_forward(c, &rows[i], 1, dec, &e)) fail_msg("%s", e.msg);
        assert_memory_equal(dec, pre + i * V, sizeof(float) * (size_t)V);
    }
    md_ctx_free(c);
    free(pre), free(dec), free(want);
    b->destroy(b);
    md_model_free(m);
    vx_source_close(src);
    mwt_rmrf(dir);
    free(dir);
}

static void test_variants(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) check_variant(&variants[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
