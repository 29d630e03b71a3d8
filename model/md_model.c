/* model/md_model.c — loading a model: the config from the source's metadata, then every dense
 * tensor the family expects, checked for presence, shape and type, and an audit that the source
 * holds no dense tensor the family does not use. */
#include "model/md_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_family.h"

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

/* Finds tensor `name` and checks it is ne0 × ne1 (ne1 = 0: a vector of ne0). Returns it, NULL
 * when absent and optional, or NULL with err set. */
static const vx_tensor *find(loader *L, const char *name, int64_t ne0, int64_t ne1, bool required,
                             int *failed, mw_err *err) {
    const vx_tensor *t = vx_source_tensor(L->src, name);
    if (!t) {
        if (required) {
            mw_errf(err, "%s: missing tensor '%s' (%s)", vx_source_path(L->src), name,
                    L->cfg->arch);
            *failed = 1;
        }
        return NULL;
    }
    char got[96];
    int want_dims = ne1 ? 2 : 1;
    bool ok = t->n_dims == want_dims && t->ne[0] == ne0 && (!ne1 || t->ne[1] == ne1);
    if (!ok) {
        if (ne1)
            mw_errf(err, "%s: tensor '%s' has shape %s, expected [%lld, %lld]",
                    vx_source_path(L->src), name, describe_ne(t, got, sizeof got), (long long)ne0,
                    (long long)ne1);
        else
            mw_errf(err, "%s: tensor '%s' has shape %s, expected [%lld]", vx_source_path(L->src),
                    name, describe_ne(t, got, sizeof got), (long long)ne0);
        *failed = 1;
        return NULL;
    }
    if (note_used(L, name, err)) {
        *failed = 1;
        return NULL;
    }
    return t;
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
    w->wq = mat(L, NAME("attn_q.weight"), q, E, true, &failed, err);
    w->wk = mat(L, NAME("attn_k.weight"), kdim, E, true, &failed, err);
    w->wv = mat(L, NAME("attn_v.weight"), vdim, E, true, &failed, err);
    w->wo = mat(L, NAME("attn_output.weight"), E, o, true, &failed, err);
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
    w->router = mat(L, NAME("ffn_gate_inp.weight"), c->n_expert, E, true, &failed, err);
    if (c->router.logit_bias)
        w->router_b = vec(L, NAME("ffn_gate_inp.bias"), c->n_expert, true, &failed, err);
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

int md_model_pin_dense(md_model *m, mw_err *err) {
    if (m->pin.buf) return 0;
    /* what a decode step reads whole: attention, router, LM head (of the embedding it reads one
     * row; a tied LM head gets its own copy and the embedding stays a view) */
    const size_t n = (size_t)m->cfg.n_layer * 5 + 1;
    kn_mat **mats = malloc(n * sizeof *mats);
    if (!mats) return mw_errf(err, "out of memory");
    size_t k = 0;
    for (int il = 0; il < m->cfg.n_layer; il++) {
        md_layer *w = &m->layers[il];
        mats[k++] = &w->wq, mats[k++] = &w->wk, mats[k++] = &w->wv;
        mats[k++] = &w->wo, mats[k++] = &w->router;
    }
    mats[k++] = &m->output;
    const int rc = md_pin_mats(&m->pin, mats, k, vx_source_path(m->src), err);
    free(mats);
    return rc;
}

size_t md_model_pinned_bytes(const md_model *m) {
    return m->pin.bytes;
}

void md_model_free(md_model *m) {
    if (!m) return;
    md_pin_free(&m->pin);
    md_config_free(&m->cfg);
    for (size_t i = 0; i < m->n_vecs; i++) free(m->vecs[i]);
    free(m->vecs);
    free(m->layers);
    free(m);
}
