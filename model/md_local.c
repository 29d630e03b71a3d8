/* model/md_local.c — the in-process expert backend. Routed rows become (row, expert, weight)
 * assignments in selection order and go through md_moe_exec in PARTIAL mode, so each row's sum
 * runs j = 0 .. k-1 exactly as an exact-mode coordinator would reduce it. */
#include "model/md_local.h"

#include <stdlib.h>
#include <string.h>

typedef struct local {
    int n_layer, n_expert;
    int64_t width;         /* the experts' (md_expert_width) */
    md_expert_table table; /* every expert of the source */
    kn_glu glu;
    kn_pool *pool;
    md_moe_ws *ws;
    md_assignment *assign;
    int64_t assign_cap;
    uint64_t weight_bytes;
} local;

static const kn_expert *lookup(void *ctx, int layer, int expert, mw_err *err) {
    local *l = ctx;
    if (layer < 0 || layer >= l->n_layer || expert < 0 || expert >= l->n_expert ||
        !md_expert_table_at(&l->table, layer, expert)->gate.data) {
        mw_errf(err, "local experts: no expert (%d, %d) in a %d-layer, %d-expert model", layer,
                expert, l->n_layer, l->n_expert);
        return NULL;
    }
    return md_expert_table_at(&l->table, layer, expert);
}

static int run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    local *l = b->impl;
    const int64_t n = batch->T * batch->k;
    if (batch->T < 0 || batch->k < 1 || batch->k > l->n_expert)
        return mw_errf(err, "local experts: bad batch (%lld rows, k %d)", (long long)batch->T,
                       batch->k);
    if (batch->width != l->width)
        return mw_errf(err, "local experts: rows of %lld values, the experts take %lld",
                       (long long)batch->width, (long long)l->width);
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
        md_expert_table_free(&l->table);
        free(l->assign);
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
    b->row_lost = NULL; /* every expert is in this process: no row fails alone */
    b->impl = l;
    l->n_layer = cfg->n_layer;
    l->n_expert = cfg->n_expert;
    l->width = md_expert_width(cfg);
    l->glu = cfg->glu;
    l->pool = pool;
    l->ws = md_moe_ws_new();
    if (!l->ws) {
        destroy(b);
        return mw_errf(err, "local experts: out of memory");
    }
    if (md_expert_table_load(&l->table, src, cfg, NULL, false, err)) {
        destroy(b);
        return mw_err_wrap(err, "local experts of %s", vx_source_path(src));
    }
    *out = b;
    return 0;
}

int md_local_backend_pin(md_expert_backend *b, mw_err *err) {
    return md_expert_table_pin(&((local *)b->impl)->table, "local experts", err);
}

size_t md_local_backend_pinned_bytes(const md_expert_backend *b) {
    return ((const local *)b->impl)->table.pin.bytes;
}

uint64_t md_local_backend_weight_bytes(const md_expert_backend *b) {
    return ((const local *)b->impl)->weight_bytes;
}
