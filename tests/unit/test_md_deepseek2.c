/* tests/unit/test_md_deepseek2.c — deepseek2 models of other shapes than the fixture's, from
 * `vindex synth`, against an independent float64 evaluation of the rules in FORMATS.md §7 written
 * here: latent attention in its plain (decompressed, multi-head) form rather than the absorbed one
 * the model runs, YaRN on adjacent pairs, the attention scale with mscale², the router's gating,
 * selection bias, group limit, normalisation and scale, dense and shared FFNs. The variants cover
 * what the fixture does not: no query down-projection (q_lora 0), softmax gating, no groups or
 * other group counts, no normalisation, other scales, several shared experts, no dense layer, other
 * head widths. f32 numerics must agree within 1e-4 at every position; prefill, token-by-token
 * decode and two interleaved sequences give the same bits. And the MoE step through a backend
 * with submit / wait halves gives the local backend's bits. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mwt_ref.h"

#include "model/md_local.h"
#include "model/md_model.h"
#include "vindex/vx_synth.h"

#define T_TOK 24

/* What the reference knows of a variant: the synth options it was made with. */
typedef struct variant {
    const char *name;
    int layers, hidden, heads, nope, rope, v, q_lora, kv_lora;
    int experts, top_k, ff, dense_layers, dense_ff, shared, groups, groups_used;
    int gating; /* 1 softmax, 2 sigmoid */
    int norm;
    float scale;
    const char *expert_format;
    uint64_t seed;
} variant;

static const variant variants[] = {
    /* q_lora 0 (one attn_q), softmax gating, no groups, no normalisation, no scale, no dense
     * layer, no shared expert */
    {"plain-q-softmax", 3, 128, 4, 32, 16, 32, 0, 64, 8, 2, 64, 0, 0, 0, 1, 1, 1, 0, 0.0f,
     "mxfp4",           11},
    /* 8 groups of 8 with 3 kept, sigmoid, top-6, two shared experts, scale 1.5 without norm,
     * two dense layers, v wider than nope */
    {"groups-8-of-64", 4, 128, 2, 32, 32, 48, 64, 32, 64, 6, 64, 2, 192, 2, 8, 3, 2, 0, 1.5f,
     "mxfp4",          23},
    /* DeepSeek-V3's router with other widths: 4 groups keep 2, normalised, scale 2.5 */
    {"v3-router", 3, 256, 4, 64, 32, 64, 128, 96,   16,     4,
     256,         1, 512, 1, 4,  2,  2,  1,   2.5f, "q6_K", 7},
};

/* ---- the model file ---------------------------------------------------------------------------
 */

static void synth(const variant *v, const char *path) {
    const struct {
        const char *key;
        int val;
    } ints[] = {{"layers", v->layers},
                {"hidden", v->hidden},
                {"heads", v->heads},
                {"head-dim", v->nope},
                {"rope-dim", v->rope},
                {"v-dim", v->v},
                {"q-lora", v->q_lora},
                {"kv-lora", v->kv_lora},
                {"experts", v->experts},
                {"top-k", v->top_k},
                {"expert-ff", v->ff},
                {"dense-layers", v->dense_layers},
                {"dense-ff", v->dense_ff},
                {"shared-experts", v->shared},
                {"groups", v->groups},
                {"groups-used", v->groups_used},
                {"gating", v->gating},
                {"weights-norm", v->norm},
                {"vocab", 300}};
    enum { N = sizeof ints / sizeof ints[0] };
    char vals[N + 2][24];
    const char *kv[2 * N + 12];
    int k = 0;
    kv[k++] = "arch", kv[k++] = "deepseek2";
    for (int i = 0; i < N; i++) {
        if (!strcmp(ints[i].key, "dense-ff") && !v->dense_layers) continue;
        snprintf(vals[i], sizeof vals[i], "%d", ints[i].val);
        kv[k++] = ints[i].key, kv[k++] = vals[i];
    }
    snprintf(vals[N], sizeof vals[N], "%g", (double)v->scale);
    snprintf(vals[N + 1], sizeof vals[N + 1], "%llu", (unsigned long long)v->seed);
    kv[k++] = "weights-scale", kv[k++] = vals[N];
    kv[k++] = "seed", kv[k++] = vals[N + 1];
    kv[k++] = "expert-format", kv[k++] = v->expert_format;
    kv[k] = NULL;
    vx_input *in;
    mw_err e;
    if (vx_synth_input_kv(kv, &in, &e) || vx_input_write_gguf(in, path, NULL, NULL, &e))
        fail_msg("%s: %s", v->name, e.msg);
    vx_input_close(in);
}

/* ---- the float64 reference ----------------------------------------------------------------------
 */

typedef struct ref {
    const variant *v;
    mwt_ref m;
} ref;

static const mwt_glu swiglu = {0};

/* The experts chosen for one row and their weights (FORMATS.md §7, step 5). */
static void route(const variant *v, const double *logit, const double *bias, int *ids, double *w) {
    const mwt_route p = {v->experts, v->top_k,  v->gating,     v->norm != 0,
                         v->scale,   v->groups, v->groups_used};
    mwt_ref_route(&p, logit, bias, ids, w);
}

/* YaRN on pairs (2i, 2i + 1): factor 40 over 4096 positions, base 10000, beta 32 / 1, magnitude 1
 * (mscale_all_dim 1). */
static void rope(double *x, int n_rot, int pos) {
    const double base = 10000, f = 40, orig = 4096;
    const double lo = fmax(0, floor(n_rot * log(orig / (32 * 2 * M_PI)) / (2 * log(base))));
    const double hi = fmin(n_rot - 1, ceil(n_rot * log(orig / (1 * 2 * M_PI)) / (2 * log(base))));
    for (int i = 0; i < n_rot / 2; i++) {
        const double ex = pos * pow(base, -2.0 * i / n_rot), in = ex / f;
        const double ramp = 1 - fmin(1, fmax(0, (i - lo) / fmax(0.001, hi - lo)));
        const double th = in * (1 - ramp) + ex * ramp;
        const double a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * cos(th) - b * sin(th);
        x[2 * i + 1] = a * sin(th) + b * cos(th);
    }
}

/* The reference's activations for T tokens: the residual stream x (T × hidden) and, per layer,
 * the decompressed attention inputs (q, k's latent part kn, the shared roped key kpe, v). */
typedef struct acts {
    int T;
    double *x, *h, *q, *kn, *kpe, *vv, *o, *y, *c, *w, *tmp, *p;
} acts;

/* Token t's query, roped key and per-head key / value of layer l (the decompressed form: per head
 * k = [K_h^T c, rope(k_pe)], v = V_h c). */
static void attn_inputs(const ref *r, acts *a, int l, int t) {
    const variant *v = r->v;
    const int64_t Hd = v->hidden, H = v->heads, dq = v->nope + v->rope, R = v->kv_lora;
    kn_mat kb = mwt_ref_tensor(&r->m, "blk.%d.attn_k_b.weight", l),
           vb = mwt_ref_tensor(&r->m, "blk.%d.attn_v_b.weight", l);
    kn_mat kva = mwt_ref_tensor(&r->m, "blk.%d.attn_kv_a_mqa.weight", l);
    memcpy(a->h, a->x + t * Hd, sizeof(double) * (size_t)Hd);
    mwt_ref_vec(&r->m, "blk.%d.attn_norm.weight", l, Hd, a->w);
    mwt_ref_rmsnorm(a->h, Hd, a->w, 1e-6);
    if (v->q_lora) {
        kn_mat qa = mwt_ref_tensor(&r->m, "blk.%d.attn_q_a.weight", l),
               qb = mwt_ref_tensor(&r->m, "blk.%d.attn_q_b.weight", l);
        mwt_ref_mv(&r->m, &qa, 0, v->q_lora, a->h, a->tmp);
        mwt_ref_vec(&r->m, "blk.%d.attn_q_a_norm.weight", l, v->q_lora, a->w);
        mwt_ref_rmsnorm(a->tmp, v->q_lora, a->w, 1e-6);
        mwt_ref_mv(&r->m, &qb, 0, H * dq, a->tmp, a->q + t * H * dq);
    } else {
        kn_mat wq = mwt_ref_tensor(&r->m, "blk.%d.attn_q.weight", l);
        mwt_ref_mv(&r->m, &wq, 0, H * dq, a->h, a->q + t * H * dq);
    }
    for (int hh = 0; hh < H; hh++) rope(a->q + (t * H + hh) * dq + v->nope, v->rope, t);
    mwt_ref_mv(&r->m, &kva, 0, R + v->rope, a->h, a->c);
    mwt_ref_vec(&r->m, "blk.%d.attn_kv_a_norm.weight", l, R, a->w);
    mwt_ref_rmsnorm(a->c, R, a->w, 1e-6);
    rope(a->c + R, v->rope, t);
    memcpy(a->kpe + t * v->rope, a->c + R, sizeof(double) * (size_t)v->rope);
    for (int hh = 0; hh < H; hh++) {
        for (int i = 0; i < v->nope; i++) { /* (K_h^T c)_i = sum over the latent */
            double s = 0;
            for (int64_t j = 0; j < R; j++) {
                kn_mat_row(&kb, hh * R + j, r->m.row);
                s += (double)r->m.row[i] * a->c[j];
            }
            a->kn[(t * H + hh) * v->nope + i] = s;
        }
        mwt_ref_mv(&r->m, &vb, hh * v->v, v->v, a->c, a->vv + (t * H + hh) * v->v);
    }
}

/* Token t's causal attention over tokens 0..t, through attn_output, added to its residual. */
static void attend(const ref *r, acts *a, int l, int t) {
    const variant *v = r->v;
    const int64_t Hd = v->hidden, H = v->heads, dq = v->nope + v->rope;
    const double ms = 1 + 0.1 * 1.0 * log(40.0), kq = ms * ms / sqrt((double)dq);
    kn_mat wo = mwt_ref_tensor(&r->m, "blk.%d.attn_output.weight", l);
    for (int hh = 0; hh < H; hh++) {
        const double *qh = a->q + (t * H + hh) * dq;
        double mx = -INFINITY, z = 0;
        for (int u = 0; u <= t; u++) {
            double s = 0;
            for (int i = 0; i < v->nope; i++) s += qh[i] * a->kn[(u * H + hh) * v->nope + i];
            for (int i = 0; i < v->rope; i++) s += qh[v->nope + i] * a->kpe[u * v->rope + i];
            a->p[u] = s * kq;
            mx = fmax(mx, a->p[u]);
        }
        for (int u = 0; u <= t; u++) z += (a->p[u] = exp(a->p[u] - mx));
        for (int i = 0; i < v->v; i++) {
            double s = 0;
            for (int u = 0; u <= t; u++) s += a->p[u] / z * a->vv[(u * H + hh) * v->v + i];
            a->o[hh * v->v + i] = s;
        }
    }
    mwt_ref_mv(&r->m, &wo, 0, Hd, a->o, a->y);
    for (int64_t i = 0; i < Hd; i++) a->x[t * Hd + i] += a->y[i];
}

/* Token t's FFN of layer l, dense or routed + shared, added to its residual. */
static void ffn(const ref *r, acts *a, int l, int t) {
    const variant *v = r->v;
    const int64_t Hd = v->hidden;
    double *h = a->h, *y = a->y;
    memcpy(h, a->x + t * Hd, sizeof(double) * (size_t)Hd);
    mwt_ref_vec(&r->m, "blk.%d.ffn_norm.weight", l, Hd, a->w);
    mwt_ref_rmsnorm(h, Hd, a->w, 1e-6);
    double *acc = calloc((size_t)Hd, sizeof *acc);
    if (l < v->dense_layers) {
        kn_mat g = mwt_ref_tensor(&r->m, "blk.%d.ffn_gate.weight", l),
               u = mwt_ref_tensor(&r->m, "blk.%d.ffn_up.weight", l),
               d = mwt_ref_tensor(&r->m, "blk.%d.ffn_down.weight", l);
        mwt_ref_ffn(&r->m, &swiglu, &g, &u, &d, h, acc);
    } else {
        kn_mat router = mwt_ref_tensor(&r->m, "blk.%d.ffn_gate_inp.weight", l);
        double logit[256], bias[256], wt[32];
        int ids[32];
        mwt_ref_mv(&r->m, &router, 0, v->experts, h, logit);
        mwt_ref_vec(&r->m, "blk.%d.exp_probs_b.bias", l, v->experts, bias);
        route(v, logit, bias, ids, wt);
        for (int j = 0; j < v->top_k; j++) {
            kn_expert e;
            mw_err err;
            if (vx_source_expert(r->m.src, l, ids[j], &e, &err)) fail_msg("%s", err.msg);
            mwt_ref_ffn(&r->m, &swiglu, &e.gate, &e.up, &e.down, h, y);
            for (int64_t i = 0; i < Hd; i++) acc[i] += wt[j] * y[i];
        }
        if (v->shared) {
            kn_mat g = mwt_ref_tensor(&r->m, "blk.%d.ffn_gate_shexp.weight", l),
                   u = mwt_ref_tensor(&r->m, "blk.%d.ffn_up_shexp.weight", l),
                   d = mwt_ref_tensor(&r->m, "blk.%d.ffn_down_shexp.weight", l);
            mwt_ref_ffn(&r->m, &swiglu, &g, &u, &d, h, y);
            for (int64_t i = 0; i < Hd; i++) acc[i] += y[i];
        }
    }
    for (int64_t i = 0; i < Hd; i++) a->x[t * Hd + i] += acc[i];
    free(acc);
}

static acts acts_new(const variant *v, int T) {
    const int64_t Hd = v->hidden, H = v->heads, dq = v->nope + v->rope, R = v->kv_lora;
    return (acts){.T = T,
                  .x = calloc((size_t)(T * Hd), sizeof(double)),
                  .h = malloc(sizeof(double) * (size_t)Hd),
                  .q = malloc(sizeof(double) * (size_t)(T * H * dq)),
                  .kn = malloc(sizeof(double) * (size_t)(T * H * v->nope)),
                  .kpe = malloc(sizeof(double) * (size_t)(T * v->rope)),
                  .vv = malloc(sizeof(double) * (size_t)(T * H * v->v)),
                  .o = malloc(sizeof(double) * (size_t)(H * v->v)),
                  .y = malloc(sizeof(double) * (size_t)Hd),
                  .c = malloc(sizeof(double) * (size_t)(R + v->rope)),
                  .w = malloc(sizeof(double) * 65536),
                  .tmp = malloc(sizeof(double) * 65536),
                  .p = malloc(sizeof(double) * (size_t)T)};
}

static void acts_free(acts *a) {
    free(a->x), free(a->h), free(a->q), free(a->kn), free(a->kpe), free(a->vv), free(a->o);
    free(a->y), free(a->c), free(a->w), free(a->tmp), free(a->p);
}

/* Logits of T tokens (one sequence from position 0), T × n_vocab. */
static double *reference(const variant *v, const vx_source *src, const int32_t *tok, int T,
                         int64_t V) {
    const int64_t Hd = v->hidden;
    ref r = {v, mwt_ref_open(v->name, src)};
    acts a = acts_new(v, T);
    kn_mat emb = mwt_ref_tensor(&r.m, "token_embd.weight", 0);
    for (int t = 0; t < T; t++) {
        kn_mat_row(&emb, tok[t], r.m.row);
        for (int64_t i = 0; i < Hd; i++) a.x[t * Hd + i] = r.m.row[i];
    }
    for (int l = 0; l < v->layers; l++) {
        for (int t = 0; t < T; t++) attn_inputs(&r, &a, l, t);
        for (int t = 0; t < T; t++) attend(&r, &a, l, t);
        for (int t = 0; t < T; t++) ffn(&r, &a, l, t);
    }
    double *logits = malloc(sizeof(double) * (size_t)(T * V));
    kn_mat out = mwt_ref_tensor(&r.m, "output.weight", 0);
    for (int t = 0; t < T; t++) {
        memcpy(a.h, a.x + t * Hd, sizeof(double) * (size_t)Hd);
        mwt_ref_vec(&r.m, "output_norm.weight", 0, Hd, a.w);
        mwt_ref_rmsnorm(a.h, Hd, a.w, 1e-6);
        mwt_ref_mv(&r.m, &out, 0, V, a.h, logits + t * V);
    }
    mwt_ref_close(&r.m);
    acts_free(&a);
    return logits;
}

/* ---- the checks -------------------------------------------------------------------------------
 */

typedef struct loaded {
    vx_source *src;
    md_model *m;
    md_expert_backend *b;
} loaded;

static void load(loaded *L, const char *path) {
    mw_err e;
    if (vx_source_open(path, NULL, &L->src, &e) || md_model_load(L->src, &L->m, &e) ||
        md_local_backend_new(L->src, &L->m->cfg, NULL, &L->b, &e))
        fail_msg("%s: %s", path, e.msg);
}

static void unload(loaded *L) {
    L->b->destroy(L->b);
    md_model_free(L->m);
    vx_source_close(L->src);
}

static md_ctx *ctx(const loaded *L, int n_seq, kn_pool *pool) {
    md_ctx_params p = {
        .numerics = KN_NUM_F32, .pool = pool, .experts = L->b, .n_seq = n_seq, .n_ctx = 64};
    md_ctx *c;
    mw_err e;
    if (md_ctx_new(L->m, &p, &c, &e)) fail_msg("%s", e.msg);
    return c;
}

static void check_variant(const variant *v) {
    char *dir = mwt_tmpdir("ds2");
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, v->name);
    synth(v, path);
    loaded L;
    load(&L, path);
    const int64_t V = L.m->cfg.n_vocab;
    int32_t tok[T_TOK];
    for (int i = 0; i < T_TOK; i++) tok[i] = (int32_t)((i * 97 + v->seed * 13) % 290);
    /* prefill on one thread */
    float *pre = malloc(sizeof(float) * (size_t)(T_TOK * V));
    md_row rows[T_TOK];
    for (int i = 0; i < T_TOK; i++) rows[i] = (md_row){0, i, tok[i], 1};
    mw_err e;
    md_ctx *c = ctx(&L, 1, NULL);
    if (md_forward(c, rows, T_TOK, pre, &e)) fail_msg("%s", e.msg);
    md_ctx_free(c);
    double *want = reference(v, L.src, tok, T_TOK, V);
    double d = 0;
    for (int64_t i = 0; i < T_TOK * V; i++) d = fmax(d, fabs(pre[i] - want[i]));
    printf("    %-16s f32 vs float64 reference: max |diff| %.3g over %d positions\n", v->name, d,
           T_TOK);
    if (!(d < 1e-4)) fail_msg("%s: max |diff| %.3g against the reference", v->name, d);
    /* decode token by token on two threads: the same bits */
    kn_pool *pool = kn_pool_create(2);
    c = ctx(&L, 1, pool);
    float *dec = malloc(sizeof(float) * (size_t)V);
    for (int i = 0; i < T_TOK; i++) {
        if (md_forward(c, &rows[i], 1, dec, &e)) fail_msg("%s", e.msg);
        assert_memory_equal(dec, pre + i * V, sizeof(float) * (size_t)V);
    }
    md_ctx_free(c);
    /* two sequences interleaved in one batch (the second a shorter prompt of other tokens),
     * then each continued: the same bits as alone */
    c = ctx(&L, 2, pool);
    md_row mix[T_TOK + 8];
    int n = 0, a = 0, b = 0;
    int32_t tb[8];
    for (int i = 0; i < 8; i++) tb[i] = tok[T_TOK - 1 - i];
    while (a < 16 || b < 8) {
        if (b < 8 && (n % 3 == 1 || a >= 16)) {
            mix[n++] = (md_row){1, b, tb[b], 1};
            b++;
        } else {
            mix[n++] = (md_row){0, a, tok[a], 1};
            a++;
        }
    }
    float *out = malloc(sizeof(float) * (size_t)(n * V));
    if (md_forward(c, mix, n, out, &e)) fail_msg("%s", e.msg);
    float *alone_b = malloc(sizeof(float) * (size_t)(8 * V));
    md_ctx *cb = ctx(&L, 1, NULL);
    md_row rb[8];
    for (int i = 0; i < 8; i++) rb[i] = (md_row){0, i, tb[i], 1};
    if (md_forward(cb, rb, 8, alone_b, &e)) fail_msg("%s", e.msg);
    md_ctx_free(cb);
    for (int i = 0; i < n; i++) {
        const float *ref_row = mix[i].seq ? alone_b + mix[i].pos * V : pre + mix[i].pos * V;
        assert_memory_equal(out + i * V, ref_row, sizeof(float) * (size_t)V);
    }
    for (int i = 16; i < T_TOK; i++) {
        if (md_forward(c, &rows[i], 1, dec, &e)) fail_msg("%s", e.msg);
        assert_memory_equal(dec, pre + i * V, sizeof(float) * (size_t)V);
    }
    /* the latent cache: kv_lora + rope floats per position and layer, nothing else (two
     * sequences, each allocated for its first 64 positions) */
    const uint64_t per_pos = (uint64_t)(v->kv_lora + v->rope) * sizeof(float) * (uint64_t)v->layers;
    assert_int_equal(md_ctx_kv_bytes(c), per_pos * 2 * 64);
    md_ctx_free(c);
    kn_pool_destroy(pool);
    free(out);
    free(alone_b);
    free(dec);
    free(pre);
    free(want);
    unload(&L);
    mwt_rmrf(dir);
    free(dir);
}

/* ---- the MoE step in two halves ----------------------------------------------------------------
 */

/* The local backend behind submit / wait: submit only records the batch, wait runs it, as a
 * remote backend's replies would arrive. */
typedef struct split {
    md_expert_backend be;
    md_expert_backend *inner;
    const md_moe_batch *pending;
    int submits, waits;
} split;

static int split_submit(md_expert_backend *b, const md_moe_batch *batch, mw_err *err) {
    split *s = b->impl;
    (void)err;
    assert_null(s->pending); /* one batch in flight */
    s->pending = batch;
    s->submits++;
    return 0;
}

static int split_wait(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    split *s = b->impl;
    assert_ptr_equal(s->pending, batch);
    s->pending = NULL;
    s->waits++;
    return s->inner->run(s->inner, batch, out, err);
}

static int split_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    (void)b, (void)batch, (void)out;
    return mw_errf(err, "run called on a backend with halves");
}

/* The fixture through a backend with halves: the same bits as the local backend run whole, one
 * submit and one wait per MoE layer, and the time of each half accounted. */
static void test_submit_then_wait(void **state) {
    (void)state;
    loaded L;
    load(&L, mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"));
    const int64_t V = L.m->cfg.n_vocab;
    int32_t tok[T_TOK];
    for (int i = 0; i < T_TOK; i++) tok[i] = (int32_t)((i * 53 + 5) % 500);
    md_row rows[T_TOK];
    for (int i = 0; i < T_TOK; i++) rows[i] = (md_row){0, i, tok[i], 1};
    float *a = malloc(sizeof(float) * (size_t)(T_TOK * V)), *b = malloc(sizeof(float) * (size_t)V);
    mw_err e;
    md_ctx *c = ctx(&L, 1, NULL);
    if (md_forward(c, rows, T_TOK, a, &e)) fail_msg("%s", e.msg);
    assert_int_equal(md_ctx_moe_timing(c).layers, 2); /* layers 1 and 2; layer 0 is dense */
    md_ctx_free(c);
    split sp = {.be = {.name = "split",
                       .run = split_run,
                       .submit = split_submit,
                       .wait = split_wait,
                       .impl = &sp},
                .inner = L.b};
    md_ctx_params p = {.numerics = KN_NUM_F32, .experts = &sp.be, .n_ctx = 64};
    if (md_ctx_new(L.m, &p, &c, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < T_TOK; i++) {
        if (md_forward(c, &rows[i], 1, b, &e)) fail_msg("%s", e.msg);
        assert_memory_equal(b, a + i * V, sizeof(float) * (size_t)V);
    }
    assert_int_equal(sp.submits, 2 * T_TOK);
    assert_int_equal(sp.waits, 2 * T_TOK);
    const md_moe_timing t = md_ctx_moe_timing(c);
    assert_int_equal(t.layers, 2 * T_TOK);
    assert_true(t.shared_ns > 0 && t.wait_ns > 0); /* the shared expert ran between the halves */
    md_ctx_reset_moe_timing(c);
    assert_int_equal(md_ctx_moe_timing(c).layers, 0);
    md_ctx_free(c);
    free(a);
    free(b);
    unload(&L);
}

static void test_plain_query_softmax(void **state) {
    (void)state;
    check_variant(&variants[0]);
}

static void test_eight_groups(void **state) {
    (void)state;
    check_variant(&variants[1]);
}

static void test_v3_router(void **state) {
    (void)state;
    check_variant(&variants[2]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_query_softmax),
        cmocka_unit_test(test_eight_groups),
        cmocka_unit_test(test_v3_router),
        cmocka_unit_test(test_submit_then_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
