/* model/md_model.c — loading a model: the config from the source's metadata, then every dense
 * tensor the family expects, checked for presence, shape and type, and an audit that the source
 * holds no dense tensor the family does not use. */
#include "model/md_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_family.h"
#include "model/md_kda_state.h"
#include "model/md_kv.h"

typedef struct loader {
    const vx_source *src;
    const md_config *cfg;
    md_model *m;
    /* names the model consumed, for the audit */
    char **used;
    size_t n_used, cap_used;
} loader;

static int note_used(loader *L, const char *name, mw_err *err) {
    if (L->n_used == L->cap_used) {
        size_t cap = L->cap_used ? 2 * L->cap_used : 64;
        char **u = realloc(L->used, cap * sizeof *u);
        if (!u) return mw_errf(err, "out of memory");
        L->used = u;
        L->cap_used = cap;
    }
    L->used[L->n_used] = strdup(name);
    if (!L->used[L->n_used]) return mw_errf(err, "out of memory");
    L->n_used++;
    return 0;
}

/* n floats the model owns (freed with it). */
static float *own_floats(md_model *m, int64_t n, mw_err *err) {
    if (m->n_vecs == m->cap_vecs) {
        size_t cap = m->cap_vecs ? 2 * m->cap_vecs : 64;
        float **v = realloc(m->vecs, cap * sizeof *v);
        if (!v) {
            mw_errf(err, "out of memory");
            return NULL;
        }
        m->vecs = v;
        m->cap_vecs = cap;
    }
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) {
        mw_errf(err, "out of memory for a vector of %lld floats", (long long)n);
        return NULL;
    }
    m->vecs[m->n_vecs++] = f;
    return f;
}

static const char *describe_ne(const vx_tensor *t, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    snprintf(buf + o, o < n ? n - o : 0, "]");
    return buf;
}

/* Finds tensor `name` and checks its shape is ne[0 .. n_dims) (GGUF order). Returns it, NULL when
 * absent and optional, or NULL with err set. */
static const vx_tensor *find_nd(loader *L, const char *name, int n_dims, const int64_t *ne,
                                bool required, int *failed, mw_err *err) {
    const vx_tensor *t = vx_source_tensor(L->src, name);
    if (!t) {
        if (required) {
            mw_errf(err, "%s: missing tensor '%s' (%s)", vx_source_path(L->src), name,
                    L->cfg->arch);
            *failed = 1;
        }
        return NULL;
    }
    bool ok = t->n_dims == n_dims;
    for (int d = 0; ok && d < n_dims; d++) ok = t->ne[d] == ne[d];
    if (!ok) {
        char got[96], want[96];
        size_t o = (size_t)snprintf(want, sizeof want, "[");
        for (int d = 0; d < n_dims && o < sizeof want; d++)
            o += (size_t)snprintf(want + o, sizeof want - o, "%s%lld", d ? ", " : "",
                                  (long long)ne[d]);
        snprintf(want + o, o < sizeof want ? sizeof want - o : 0, "]");
        mw_errf(err, "%s: tensor '%s' has shape %s, expected %s", vx_source_path(L->src), name,
                describe_ne(t, got, sizeof got), want);
        *failed = 1;
        return NULL;
    }
    if (note_used(L, name, err)) {
        *failed = 1;
        return NULL;
    }
    return t;
}

/* The same for a matrix ne0 × ne1 (ne1 = 0: a vector of ne0). */
static const vx_tensor *find(loader *L, const char *name, int64_t ne0, int64_t ne1, bool required,
                             int *failed, mw_err *err) {
    const int64_t ne[2] = {ne0, ne1};
    return find_nd(L, name, ne1 ? 2 : 1, ne, required, failed, err);
}

/* t as a kn_mat of `rows` × `cols` in a type the kernels compute, its bytes all inside the source.
 */
static int as_mat(loader *L, const vx_tensor *t, int64_t rows, int64_t cols, kn_mat *m,
                  mw_err *err) {
    const kn_type_traits *tr = kn_traits(t->type);
    size_t rb = kn_row_size(t->type, cols);
    if (!tr || !tr->can_compute || rb == 0)
        return mw_errf(err, "%s: tensor '%s' has type %s, which the kernels cannot compute%s",
                       vx_source_path(L->src), t->name, kn_type_name(t->type),
                       tr && tr->can_compute ? " with this row length" : "");
    if (tr->planar) /* one whole matrix: the trunk takes row views (heads, embeddings) */
        return mw_errf(err, "%s: tensor '%s' has type %s, which only routed experts may have",
                       vx_source_path(L->src), t->name, kn_type_name(t->type));
    if (t->nbytes < (uint64_t)rb * (uint64_t)rows)
        return mw_errf(err, "%s: tensor '%s' holds %llu bytes, fewer than its shape needs",
                       vx_source_path(L->src), t->name, (unsigned long long)t->nbytes);
    *m = (kn_mat){.type = t->type, .rows = rows, .cols = cols, .row_bytes = rb, .data = t->data};
    return 0;
}

/* A vector the trunk reads (norm weight, bias, sinks): stored in any type the kernels dequantize
 * (checkpoints keep them in BF16), held as a model-owned f32 array — the runtime form, computed
 * once here, so the layer loop never converts. */
static const float *vec(loader *L, const char *name, int64_t n, bool required, int *failed,
                        mw_err *err) {
    if (*failed) return NULL;
    const vx_tensor *t = find(L, name, n, 0, required, failed, err);
    if (!t) return NULL;
    kn_mat row;
    float *f = NULL;
    if (as_mat(L, t, 1, n, &row, err) || !(f = own_floats(L->m, n, err))) {
        *failed = 1;
        return NULL;
    }
    kn_mat_row(&row, 0, f);
    return f;
}

/* A matrix of `rows` outputs by `cols` inputs (GGUF ne = [cols, rows]) in a computable type; any
 * such type (quantized, F16, BF16, F32) goes to kn_matmul as stored. */
static kn_mat mat(loader *L, const char *name, int64_t rows, int64_t cols, bool required,
                  int *failed, mw_err *err) {
    kn_mat m = {0};
    if (*failed) return m;
    const vx_tensor *t = find(L, name, cols, rows, required, failed, err);
    if (!t) return m;
    if (as_mat(L, t, rows, cols, &m, err)) {
        *failed = 1;
        return (kn_mat){0};
    }
    return m;
}

/* Per-head matrices of a 3-D tensor ne = [cols, rows, n_heads]: head h is the h-th rows × cols
 * matrix. */
static md_heads heads(loader *L, const char *name, int64_t rows, int64_t cols, int n_heads,
                      int *failed, mw_err *err) {
    md_heads h = {0};
    if (*failed) return h;
    const int64_t ne[3] = {cols, rows, n_heads};
    const vx_tensor *t = find_nd(L, name, 3, ne, true, failed, err);
    if (!t) return h;
    if (as_mat(L, t, rows * n_heads, cols, &h.m, err)) {
        *failed = 1;
        return (md_heads){0};
    }
    h.stride = h.m.row_bytes * (size_t)rows;
    h.m.rows = rows;
    return h;
}

/* The legacy layout's attn_kv_b [kv_lora, n_head · (nope + v)]: per head nope key rows then v
 * value rows. V_h is a view of its value rows; K_h (kv_lora × nope, as attention absorbs it) is
 * the transpose of its key rows, dequantized once into an f32 matrix the model owns. */
static void legacy_kv_b(loader *L, const char *name, md_layer *w, int *failed, mw_err *err) {
    const md_config *c = L->cfg;
    const md_mla *a = &c->mla;
    const int H = c->n_head;
    const int64_t per = a->nope + a->v;
    kn_mat kv = mat(L, name, per * H, a->kv_lora, true, failed, err);
    if (*failed) return;
    w->v_b = (md_heads){kv, kv.row_bytes * (size_t)per};
    w->v_b.m.rows = a->v;
    w->v_b.m.data = (const uint8_t *)kv.data + kv.row_bytes * (size_t)a->nope;
    float *kt = own_floats(L->m, (int64_t)H * a->kv_lora * a->nope, err);
    float *row = own_floats(L->m, a->kv_lora, err);
    if (!kt || !row) {
        *failed = 1;
        return;
    }
    for (int h = 0; h < H; h++)
        for (int i = 0; i < a->nope; i++) {
            kn_mat_row(&kv, h * per + i, row);
            for (int r = 0; r < a->kv_lora; r++)
                kt[((int64_t)h * a->kv_lora + r) * a->nope + i] = row[r];
        }
    const size_t rb = (size_t)a->nope * sizeof(float);
    w->k_b = (md_heads){{KN_F32, a->kv_lora, a->nope, rb, kt, NULL}, rb * (size_t)a->kv_lora};
}

/* Multi-head latent attention's weights (FORMATS.md §7). */
static void load_mla(loader *L, int il, md_layer *w, int *failed, mw_err *err) {
    const md_config *c = L->cfg;
    const md_mla *a = &c->mla;
    const int64_t E = c->n_embd, H = c->n_head, q = H * (a->nope + a->rope);
    char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (a->q_lora) {
        w->wq_a = mat(L, NAME("attn_q_a.weight"), a->q_lora, E, true, failed, err);
        w->q_a_norm = vec(L, NAME("attn_q_a_norm.weight"), a->q_lora, true, failed, err);
        w->wq = mat(L, NAME("attn_q_b.weight"), q, a->q_lora, true, failed, err);
    } else {
        w->wq = mat(L, NAME("attn_q.weight"), q, E, true, failed, err);
    }
    w->wkv_a = mat(L, NAME("attn_kv_a_mqa.weight"), a->kv_lora + a->rope, E, true, failed, err);
    w->kv_a_norm = vec(L, NAME("attn_kv_a_norm.weight"), a->kv_lora, true, failed, err);
    if (a->legacy) {
        if (!*failed) legacy_kv_b(L, NAME("attn_kv_b.weight"), w, failed, err);
    } else {
        w->k_b = heads(L, NAME("attn_k_b.weight"), a->kv_lora, a->nope, (int)H, failed, err);
        w->v_b = heads(L, NAME("attn_v_b.weight"), a->v, a->kv_lora, (int)H, failed, err);
    }
    if (c->family->attn_gate)
        w->wgate = mat(L, NAME("attn_gate.weight"), H * a->v, E, false, failed, err);
    w->wo = mat(L, NAME("attn_output.weight"), E, H * a->v, true, failed, err);
#undef NAME
}

/* Kimi K3's per-layer parts: the residual mixes' score vectors, the latent MoE's projections. */
static void load_k3_parts(loader *L, int il, md_layer *w, int *failed, mw_err *err) {
    const md_config *c = L->cfg;
    const int64_t E = c->n_embd, Lw = md_expert_width(c);
    char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (c->attn_res_block > 0) {
        w->res_attn = vec(L, NAME("attn_res_score.weight"), E, true, failed, err);
        w->res_ffn = vec(L, NAME("ffn_res_score.weight"), E, true, failed, err);
    }
    if (c->n_expert_latent > 0 && md_layer_is_moe(c, il)) {
        w->routed_down = mat(L, NAME("ffn_routed_down.weight"), Lw, E, true, failed, err);
        w->routed_norm = vec(L, NAME("ffn_routed_norm.weight"), Lw, false, failed, err);
        w->routed_up = mat(L, NAME("ffn_routed_up.weight"), E, Lw, true, failed, err);
    }
#undef NAME
}

/* Tensor `name` in the first of n shapes (dims[i], ne[i]) it has: converters pad some with unit
 * dimensions that llama-quantize drops again, and llama.cpp loads each form. Absent or in none of
 * them: NULL with err naming the first shape. */
static const vx_tensor *find_shapes(loader *L, const char *name, int n, const int *dims,
                                    const int64_t (*ne)[4], int *failed, mw_err *err) {
    const vx_tensor *t = vx_source_tensor(L->src, name);
    for (int i = 0; t && i < n; i++) {
        bool ok = t->n_dims == dims[i];
        for (int d = 0; ok && d < dims[i]; d++) ok = t->ne[d] == ne[i][d];
        if (ok) return find_nd(L, name, dims[i], ne[i], true, failed, err);
    }
    return find_nd(L, name, dims[0], ne[0], true, failed, err);
}

/* A convolution's taps, ne [K, 1, D] or [K, 1, D, 1] (channel c's K taps contiguous), held
 * tap-major (tap j of channel c at j·D + c) so the convolution runs along the channels. */
static const float *conv_taps(loader *L, const char *name, int64_t K, int64_t D, int *failed,
                              mw_err *err) {
    if (*failed) return NULL;
    const int dims[2] = {3, 4};
    const int64_t ne[2][4] = {{K, 1, D, 0}, {K, 1, D, 1}};
    const vx_tensor *t = find_shapes(L, name, 2, dims, ne, failed, err);
    kn_mat m;
    float *f = NULL, *row = NULL;
    if (!t || as_mat(L, t, D, K, &m, err) || !(f = own_floats(L->m, K * D, err)) ||
        !(row = own_floats(L->m, K, err))) {
        *failed = 1;
        return NULL;
    }
    for (int64_t c = 0; c < D; c++) {
        kn_mat_row(&m, c, row);
        for (int64_t j = 0; j < K; j++) f[j * D + c] = row[j];
    }
    return f;
}

/* ssm_a, one value per head: [1, H, 1, 1], [1, H] or [H] (all H values contiguous). */
static const float *head_vec(loader *L, const char *name, int64_t H, int *failed, mw_err *err) {
    if (*failed) return NULL;
    const int dims[3] = {4, 2, 1};
    const int64_t ne[3][4] = {{1, H, 1, 1}, {1, H, 0, 0}, {H, 0, 0, 0}};
    const vx_tensor *t = find_shapes(L, name, 3, dims, ne, failed, err);
    kn_mat m;
    float *f = NULL;
    if (!t || as_mat(L, t, 1, H, &m, err) || !(f = own_floats(L->m, H, err))) {
        *failed = 1;
        return NULL;
    }
    kn_mat_row(&m, 0, f);
    return f;
}

/* A KDA layer's weights (FORMATS.md §8, §9). */
static void load_kda(loader *L, int il, md_layer *w, int *failed, mw_err *err) {
    const md_config *c = L->cfg;
    const md_kda *k = &c->kda;
    const int64_t E = c->n_embd, H = k->n_head, d = k->head_dim, D = H * d;
    char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    w->wq = mat(L, NAME("attn_q.weight"), D, E, true, failed, err);
    w->wk = mat(L, NAME("attn_k.weight"), D, E, true, failed, err);
    w->wv = mat(L, NAME("attn_v.weight"), D, E, true, failed, err);
    static const char *const conv[3] = {"ssm_conv1d_q", "ssm_conv1d_k", "ssm_conv1d_v"};
    for (int x = 0; x < 3; x++) {
        snprintf(n, sizeof n, "blk.%d.%s.weight", il, conv[x]);
        w->conv[x] = conv_taps(L, n, k->conv, D, failed, err);
    }
    w->f_a = mat(L, NAME("ssm_f_a.weight"), d, E, true, failed, err);
    w->f_b = mat(L, NAME("ssm_f_b.weight"), D, d, true, failed, err);
    w->dt_b = vec(L, NAME("ssm_dt.bias"), D, true, failed, err);
    w->ssm_a = head_vec(L, NAME("ssm_a"), H, failed, err);
    w->beta = mat(L, NAME("ssm_beta.weight"), H, E, true, failed, err);
    if (k->gate_full) {
        w->g_b = mat(L, NAME("ssm_g.weight"), D, E, true, failed, err);
    } else {
        w->g_a = mat(L, NAME("ssm_g_a.weight"), d, E, true, failed, err);
        w->g_b = mat(L, NAME("ssm_g_b.weight"), D, d, true, failed, err);
    }
    w->o_norm = vec(L, NAME("ssm_norm.weight"), d, true, failed, err);
    w->wo = mat(L, NAME("attn_output.weight"), E, D, true, failed, err);
#undef NAME
}

/* A SwiGLU FFN of width ff on the coordinator (a dense layer's, or the shared experts'). */
static kn_expert ffn(loader *L, int il, const char *suffix, int64_t ff, int *failed, mw_err *err) {
    const int64_t E = L->cfg->n_embd;
    char n[128];
    kn_expert e = {0};
    snprintf(n, sizeof n, "blk.%d.ffn_gate%s.weight", il, suffix);
    e.gate = mat(L, n, ff, E, true, failed, err);
    snprintf(n, sizeof n, "blk.%d.ffn_up%s.weight", il, suffix);
    e.up = mat(L, n, ff, E, true, failed, err);
    snprintf(n, sizeof n, "blk.%d.ffn_down%s.weight", il, suffix);
    e.down = mat(L, n, E, ff, true, failed, err);
    return e;
}

static int load_layer(loader *L, int il, md_layer *w, mw_err *err) {
    const md_config *c = L->cfg;
    const int64_t E = c->n_embd;
    const int64_t q = (int64_t)c->n_head * c->head_dim_k;
    const int64_t kdim = (int64_t)c->n_head_kv * c->head_dim_k;
    const int64_t vdim = (int64_t)c->n_head_kv * c->head_dim_v;
    const int64_t o = (int64_t)c->n_head * c->head_dim_v;
    char n[128];
    int failed = 0;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    w->attn_norm = vec(L, NAME("attn_norm.weight"), E, true, &failed, err);
    if (md_layer_is_kda(c, il)) {
        load_kda(L, il, w, &failed, err);
    } else if (c->attn == MD_ATTN_MLA) {
        load_mla(L, il, w, &failed, err);
    } else {
        w->wq = mat(L, NAME("attn_q.weight"), q, E, true, &failed, err);
        w->wk = mat(L, NAME("attn_k.weight"), kdim, E, true, &failed, err);
        w->wv = mat(L, NAME("attn_v.weight"), vdim, E, true, &failed, err);
        w->wo = mat(L, NAME("attn_output.weight"), E, o, true, &failed, err);
    }
    if (c->qkv_bias) {
        w->bq = vec(L, NAME("attn_q.bias"), q, true, &failed, err);
        w->bk = vec(L, NAME("attn_k.bias"), kdim, true, &failed, err);
        w->bv = vec(L, NAME("attn_v.bias"), vdim, true, &failed, err);
    }
    if (c->o_bias) w->bo = vec(L, NAME("attn_output.bias"), E, true, &failed, err);
    if (c->qk_norm) {
        w->q_norm = vec(L, NAME("attn_q_norm.weight"), c->head_dim_k, true, &failed, err);
        w->k_norm = vec(L, NAME("attn_k_norm.weight"), c->head_dim_k, true, &failed, err);
    }
    if (c->sinks) w->sinks = vec(L, NAME("attn_sinks.weight"), c->n_head, true, &failed, err);
    if (!failed) {
        snprintf(n, sizeof n, "blk.%d.%s.weight", il, c->family->ffn_norm);
        w->ffn_norm = vec(L, n, E, true, &failed, err);
    }
    if (md_layer_is_moe(c, il)) {
        w->router = mat(L, NAME("ffn_gate_inp.weight"), c->n_expert, E, true, &failed, err);
        if (c->router.logit_bias)
            w->router_b = vec(L, NAME("ffn_gate_inp.bias"), c->n_expert, true, &failed, err);
        if (c->router.select_bias)
            w->select_b = vec(L, NAME("exp_probs_b.bias"), c->n_expert,
                              c->family->select_bias_required, &failed, err);
        /* optional shared experts come whole or not at all (a missing part is then named) */
        const bool shared = c->family->shared_optional
                                ? vx_source_tensor(L->src, NAME("ffn_gate_shexp.weight")) != NULL
                                : c->n_shared > 0;
        if (shared) w->ffn = ffn(L, il, "_shexp", c->n_ff_shared, &failed, err);
    } else {
        w->ffn = ffn(L, il, "", c->n_ff, &failed, err);
    }
    load_k3_parts(L, il, w, &failed, err);
#undef NAME
    return failed ? -1 : 0;
}

/* Expert tensors belong to the expert backend; the audit only needs to recognise their names. */
static bool is_expert_tensor(const char *name, const md_config *c) {
    int il, n = 0;
    char part[32];
    if (sscanf(name, "blk.%d.%31[a-z_].%n", &il, part, &n) != 2 || il < 0 || il >= c->n_layer)
        return false;
    static const char *const parts[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const char *rest = name + n;
    bool w = !strcmp(rest, "weight"), b = !strcmp(rest, "bias");
    if (!w && !(b && c->expert_bias)) return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strcmp(part, parts[i])) return true;
    return false;
}

static int audit(loader *L, mw_err *err) {
    size_t n = vx_source_n_tensors(L->src);
    for (size_t i = 0; i < n; i++) {
        const vx_tensor *t = vx_source_tensor_at(L->src, i);
        if (is_expert_tensor(t->name, L->cfg)) continue;
        bool used = false;
        for (size_t j = 0; j < L->n_used && !used; j++) used = !strcmp(L->used[j], t->name);
        if (!used)
            return mw_errf(err, "%s: tensor '%s' is not part of a %s model", vx_source_path(L->src),
                           t->name, L->cfg->arch);
    }
    return 0;
}

static int load(loader *L, md_model *m, mw_err *err) {
    md_config *c = &m->cfg;
    int failed = 0;
    const vx_tensor *te = vx_source_tensor(L->src, "token_embd.weight");
    if (!te || te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return mw_errf(err, "%s: %s tensor 'token_embd.weight' [n_embd, n_vocab]",
                       vx_source_path(L->src), te ? "bad" : "missing");
    c->n_vocab = te->ne[1];
    m->tok_embd = mat(L, "token_embd.weight", c->n_vocab, c->n_embd, true, &failed, err);
    m->out_norm = vec(L, "output_norm.weight", c->n_embd, true, &failed, err);
    m->output =
        mat(L, "output.weight", c->n_vocab, c->n_embd, !c->family->output_optional, &failed, err);
    if (c->attn_res_block > 0)
        m->res_out = vec(L, "output_res_score.weight", c->n_embd, true, &failed, err);
    if (failed) return -1;
    if (!m->output.data) m->output = m->tok_embd;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) return mw_errf(err, "out of memory");
    for (int il = 0; il < c->n_layer; il++)
        if (load_layer(L, il, &m->layers[il], err)) return -1;
    return audit(L, err);
}

int md_model_load(const vx_source *src, md_model **out, mw_err *err) {
    *out = NULL;
    md_model *m = calloc(1, sizeof *m);
    if (!m) return mw_errf(err, "out of memory");
    m->src = src;
    if (md_config_read(vx_source_meta(src), &m->cfg, err)) {
        free(m);
        return mw_err_wrap(err, "%s", vx_source_path(src));
    }
    loader L = {.src = src, .cfg = &m->cfg, .m = m};
    int rc = load(&L, m, err);
    for (size_t i = 0; i < L.n_used; i++) free(L.used[i]);
    free(L.used);
    if (rc) {
        md_model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

/* ---- owned copies of the streamed matrices ------------------------------------------------- */

/* A head set stored back to back as one matrix (all heads' rows), for copying; NULL data when its
 * heads are not contiguous (a legacy attn_kv_b's value rows, which stay a view). */
static kn_mat all_heads(const md_heads *h, int n_heads) {
    kn_mat all = h->m;
    if (!h->m.data || h->stride != h->m.row_bytes * (size_t)h->m.rows) all.data = NULL;
    all.rows *= n_heads;
    return all;
}

int md_model_pin_dense(md_model *m, mw_err *err) {
    if (m->pin.buf) return 0;
    /* what a decode step reads whole: attention, router, the coordinator's FFNs, the LM head (of
     * the embedding it reads one row; a tied LM head gets its own copy and the embedding stays a
     * view) */
    enum { PER_LAYER = 20 };
    const size_t n = (size_t)m->cfg.n_layer * PER_LAYER + 1;
    kn_mat **mats = malloc(n * sizeof *mats);
    kn_mat *kv = calloc(2 * (size_t)m->cfg.n_layer + 1, sizeof *kv);
    bool *plain = calloc(n, sizeof *plain);
    if (!mats || !kv || !plain) {
        free(mats);
        free(kv);
        free(plain);
        return mw_errf(err, "out of memory");
    }
    size_t k = 0;
    for (int il = 0; il < m->cfg.n_layer; il++) {
        md_layer *w = &m->layers[il];
        kn_mat *const per[PER_LAYER - 2] = {
            &w->wq,    &w->wk,       &w->wv,     &w->wo,       &w->router,      &w->wq_a,
            &w->wkv_a, &w->ffn.gate, &w->ffn.up, &w->ffn.down, &w->f_a,         &w->f_b,
            &w->beta,  &w->g_a,      &w->g_b,    &w->wgate,    &w->routed_down, &w->routed_up};
        for (int i = 0; i < PER_LAYER - 2; i++) mats[k++] = per[i];
        /* the head sets: their copies' data goes to the per-head views, so plain copies (a packed
         * one in their place would leave the views on the mapping) */
        kv[2 * il] = all_heads(&w->k_b, m->cfg.n_head);
        kv[2 * il + 1] = all_heads(&w->v_b, m->cfg.n_head);
        plain[k] = plain[k + 1] = true;
        mats[k++] = &kv[2 * il];
        mats[k++] = &kv[2 * il + 1];
    }
    mats[k++] = &m->output;
    const bool pack = md_pin_packing();
    int rc = md_pin_mats(&m->pin, mats, plain, k, pack, vx_source_path(m->src), err);
    if (rc == 0 && pack) {
        size_t np = 0; /* the matrices themselves, not the copies of the head views */
        for (size_t i = 0; i < k; i++)
            if (i == k - 1 || i % PER_LAYER < PER_LAYER - 2) mats[np++] = mats[i];
        rc = md_pin_pack(&m->packed, mats, np, vx_source_path(m->src), err);
    }
    for (int il = 0; rc == 0 && il < m->cfg.n_layer; il++) {
        md_layer *w = &m->layers[il];
        if (kv[2 * il].data) w->k_b.m.data = kv[2 * il].data;
        if (kv[2 * il + 1].data) w->v_b.m.data = kv[2 * il + 1].data;
    }
    free(mats);
    free(kv);
    free(plain);
    /* the embedding stays a view (a step reads one row of it per token): its pages mapped in now,
     * so a token's first use does not fault them in mid-step */
    if (rc == 0) md_pin_map_in(&m->tok_embd);
    return rc;
}

size_t md_model_pinned_bytes(const md_model *m) {
    return m->pin.bytes + m->packed.bytes;
}

void md_model_free(md_model *m) {
    if (!m) return;
    md_pin_free(&m->pin);
    md_pin_free(&m->packed);
    md_config_free(&m->cfg);
    for (size_t i = 0; i < m->n_vecs; i++) free(m->vecs[i]);
    free(m->vecs);
    free(m->layers);
    free(m);
}

/* A sequence's cost: its cache rows per position (full and ring layers) and its recurrent state. */
md_seq_cost md_seq_cost_of(const md_config *c, int64_t n_ctx, kn_type type) {
    const uint64_t row = md_kv_row_bytes(c, type);
    md_seq_cost cost = {.fixed = md_kda_seq_bytes(c)};
    int rings = 0;
    for (int l = 0; l < c->n_layer; l++) {
        if (md_layer_is_kda(c, l)) continue;
        const bool ring = c->n_swa > 0 && c->layer_swa[l];
        rings += ring;
        if (ring)
            cost.per_pos_ring += row;
        else
            cost.per_pos_full += row;
    }
    cost.ring = rings ? (c->n_swa < n_ctx ? c->n_swa : n_ctx) : 0;
    return cost;
}
