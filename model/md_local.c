/* model/md_local.c — the in-process expert backend. Routed rows become (row, expert, weight)
 * assignments in selection order and go through md_moe_exec in PARTIAL mode, so each row's sum
 * runs j = 0 .. k-1 exactly as an exact-mode coordinator would reduce it. */
#include "model/md_local.h"

#include <stdlib.h>
#include <string.h>

typedef struct local {
    int n_layer, n_expert;
    kn_expert *experts; /* n_layer × n_expert views into the source */
    kn_glu glu;
    kn_pool *pool;
    md_moe_ws *ws;
    md_assignment *assign;
    int64_t assign_cap;
    uint64_t weight_bytes;
    md_pin pin; /* md_local_backend_pin's copies */
} local;

static int check_mat(const kn_mat *m, int64_t rows, int64_t cols, bool present, const char *what,
                     int layer, int expert, mw_err *err) {
    if (!present) {
        if (m->data)
            return mw_errf(err, "expert (%d, %d): unexpected %s (the family has none)", layer,
                           expert, what);
        return 0;
    }
    if (!m->data) return mw_errf(err, "expert (%d, %d): missing %s", layer, expert, what);
    const kn_type_traits *tr = kn_traits(m->type);
    if (!tr || !tr->can_compute)
        return mw_errf(err, "expert (%d, %d): %s has type %s, which the kernels cannot compute",
                       layer, expert, what, kn_type_name(m->type));
    if (m->rows != rows || m->cols != cols)
        return mw_errf(err, "expert (%d, %d): %s is %lld × %lld, expected %lld × %lld", layer,
                       expert, what, (long long)m->rows, (long long)m->cols, (long long)rows,
                       (long long)cols);
    if (kn_row_size(m->type, cols) == 0 || m->row_bytes < kn_row_size(m->type, cols))
        return mw_errf(err, "expert (%d, %d): %s rows of %lld do not fit %s blocks", layer, expert,
                       what, (long long)cols, kn_type_name(m->type));
    return 0;
}

int md_expert_check(const kn_expert *e, const md_config *c, int layer, int expert, mw_err *err) {
    const int64_t E = c->n_embd, F = c->n_ff_exp;
    const bool b = c->expert_bias;
    if (check_mat(&e->gate, F, E, true, "gate", layer, expert, err) ||
        check_mat(&e->up, F, E, true, "up", layer, expert, err) ||
        check_mat(&e->down, E, F, true, "down", layer, expert, err) ||
        check_mat(&e->gate_b, 1, F, b, "gate bias", layer, expert, err) ||
        check_mat(&e->up_b, 1, F, b, "up bias", layer, expert, err) ||
        check_mat(&e->down_b, 1, E, b, "down bias", layer, expert, err))
        return -1;
    return 0;
}

static const kn_expert *lookup(void *ctx, int layer, int expert, mw_err *err) {
    local *l = ctx;
    if (layer < 0 || layer >= l->n_layer || expert >= l->n_expert ||
        !l->experts[(size_t)layer * l->n_expert + expert].gate.data) {
        mw_errf(err, "local experts: no expert (%d, %d) in a %d-layer, %d-expert model", layer,
                expert, l->n_layer, l->n_expert);
        return NULL;
    }
    return &l->experts[(size_t)layer * l->n_expert + expert];
}

static int run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    local *l = b->impl;
    const int64_t n = batch->T * batch->k;
    if (batch->T < 0 || batch->k < 1 || batch->k > l->n_expert)
        return mw_errf(err, "local experts: bad batch (%lld rows, k %d)", (long long)batch->T,
                       batch->k);
    if (n > l->assign_cap) {
        md_assignment *a = realloc(l->assign, (size_t)n * sizeof *a);
        if (!a) return mw_errf(err, "local experts: out of memory");
        l->assign = a;
        l->assign_cap = n;
    }
    for (int64_t t = 0; t < batch->T; t++)
        for (int j = 0; j < batch->k; j++) {
            int64_t i = t * batch->k + j;
            l->assign[i] = (md_assignment){(int32_t)t, batch->experts[i], batch->weights[i]};
        }
    md_moe_exec_args a = {
        .layer = batch->layer,
        .rows = batch->T,
        .width = batch->width,
        .x = batch->x,
        .assign = l->assign,
        .n_assign = n,
        .mode = MD_MOE_PARTIAL,
        .glu = &l->glu,
        .numerics = batch->numerics,
        .pool = l->pool,
        .lookup = lookup,
        .lookup_ctx = l,
        .ws = l->ws,
    };
    return md_moe_exec(&a, out, &l->weight_bytes, err);
}

static void destroy(md_expert_backend *b) {
    if (!b) return;
    local *l = b->impl;
    if (l) {
        free(l->experts);
        free(l->assign);
        md_pin_free(&l->pin);
        md_moe_ws_free(l->ws);
        free(l);
    }
    free(b);
}

int md_local_backend_new(const vx_source *src, const md_config *cfg, kn_pool *pool,
                         md_expert_backend **out, mw_err *err) {
    *out = NULL;
    md_expert_backend *b = calloc(1, sizeof *b);
    local *l = calloc(1, sizeof *l);
    if (!b || !l) {
        free(b);
        free(l);
        return mw_errf(err, "local experts: out of memory");
    }
    b->name = "local";
    b->run = run;
    b->destroy = destroy;
    b->impl = l;
    l->n_layer = cfg->n_layer;
    l->n_expert = cfg->n_expert;
    l->glu = cfg->glu;
    l->pool = pool;
    l->ws = md_moe_ws_new();
    l->experts = calloc((size_t)cfg->n_layer * cfg->n_expert, sizeof *l->experts);
    if (!l->ws || !l->experts) {
        destroy(b);
        return mw_errf(err, "local experts: out of memory");
    }
    for (int il = 0; il < cfg->n_layer; il++)
        for (int e = 0; md_layer_is_moe(cfg, il) && e < cfg->n_expert; e++) {
            kn_expert *x = &l->experts[(size_t)il * cfg->n_expert + e];
            if (vx_source_expert(src, il, e, x, err) || md_expert_check(x, cfg, il, e, err)) {
                destroy(b);
                return mw_err_wrap(err, "local experts of %s", vx_source_path(src));
            }
        }
    *out = b;
    return 0;
}

int md_local_backend_pin(md_expert_backend *b, mw_err *err) {
    local *l = b->impl;
    if (l->pin.buf) return 0;
    const size_t n = (size_t)l->n_layer * (size_t)l->n_expert;
    kn_mat **mats = malloc(6 * n * sizeof *mats);
    if (!mats) return mw_errf(err, "local experts: out of memory");
    for (size_t i = 0; i < n; i++) {
        kn_expert *e = &l->experts[i];
        kn_mat *six[6] = {&e->gate, &e->up, &e->down, &e->gate_b, &e->up_b, &e->down_b};
        memcpy(mats + 6 * i, six, sizeof six);
    }
    const int rc = md_pin_mats(&l->pin, mats, 6 * n, "local experts", err);
    free(mats);
    return rc;
}

size_t md_local_backend_pinned_bytes(const md_expert_backend *b) {
    return ((const local *)b->impl)->pin.bytes;
}

uint64_t md_local_backend_weight_bytes(const md_expert_backend *b) {
    return ((const local *)b->impl)->weight_bytes;
}
