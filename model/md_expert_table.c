/* model/md_expert_table.c — see md_expert_table.h. */
#include "model/md_expert_table.h"

#include <stdlib.h>
#include <string.h>

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
    const int64_t E = md_expert_width(c), F = c->n_ff_exp;
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

int md_expert_table_load(md_expert_table *t, const vx_source *src, const md_config *cfg,
                         const vx_expert_set *owned, bool pin, mw_err *err) {
    memset(t, 0, sizeof *t);
    t->n_layers = cfg->n_layer;
    t->n_experts = cfg->n_expert;
    t->experts = calloc((size_t)t->n_layers * (size_t)t->n_experts, sizeof *t->experts);
    if (!t->experts) return mw_errf(err, "out of memory");
    for (int l = 0; l < t->n_layers; l++)
        for (int e = 0; e < t->n_experts; e++) {
            if (!md_layer_is_moe(cfg, l) || (owned && !vx_expert_set_has(owned, l, e))) continue;
            kn_expert *x = md_expert_table_at(t, l, e);
            if (vx_source_expert(src, l, e, x, err) || md_expert_check(x, cfg, l, e, err))
                return -1;
        }
    return pin ? md_expert_table_pin(t, "experts", err) : 0;
}

int md_expert_table_pin(md_expert_table *t, const char *what, mw_err *err) {
    if (t->pin.buf) return 0;
    const size_t n = (size_t)t->n_layers * (size_t)t->n_experts;
    kn_mat **mats = malloc(6 * n * sizeof *mats);
    if (!mats) return mw_errf(err, "%s: out of memory", what);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        kn_expert *e = &t->experts[i];
        if (!e->gate.data) continue; /* not loaded */
        kn_mat *six[6] = {&e->gate, &e->up, &e->down, &e->gate_b, &e->up_b, &e->down_b};
        memcpy(mats + k, six, sizeof six);
        k += 6;
    }
    const int rc = md_pin_mats(&t->pin, mats, NULL, k, md_pin_packing(), what, err);
    free(mats);
    return rc;
}

void md_expert_table_free(md_expert_table *t) {
    md_pin_free(&t->pin);
    free(t->experts);
    memset(t, 0, sizeof *t);
}
