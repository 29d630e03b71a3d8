/* model/md_expert_table.h — the expert views an executor runs from: every (layer, expert) of a
 * source, or an owned subset of them, each checked against the model's config when it is loaded
 * (shapes at the expert width md_expert_width, biases present exactly when the family has them,
 * computable types), so a bad file fails
 * at start and not mid-generation; optionally copied onto huge pages (md_pin.h). The in-process
 * backend (md_local.c) and the expert node (expert-node/en_node.c) both hold one. */
#ifndef MD_EXPERT_TABLE_H
#define MD_EXPERT_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/kn.h"
#include "model/md_config.h"
#include "model/md_pin.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

typedef struct md_expert_table {
    int n_layers, n_experts;
    kn_expert *experts; /* n_layers × n_experts views; only the loaded ones filled */
    md_pin pin;         /* the copies the views point into, once pinned */
} md_expert_table;

/* Loads and checks the experts of the MoE layers that `owned` holds (NULL: every one) from src,
 * which must outlive the table; with `pin`, then copies them onto huge pages. Errors name the
 * expert; the caller adds the file. */
int md_expert_table_load(md_expert_table *t, const vx_source *src, const md_config *cfg,
                         const vx_expert_set *owned, bool pin, mw_err *err);
/* Copies the loaded experts' matrices onto huge pages now (a no-op when they are already); the
 * bits are the same. `what` names the owner in an out-of-memory message. */
int md_expert_table_pin(md_expert_table *t, const char *what, mw_err *err);
void md_expert_table_free(md_expert_table *t);

/* The view of (layer, expert); its matrices have no data when it was not loaded. */
static inline kn_expert *md_expert_table_at(const md_expert_table *t, int layer, int expert) {
    return &t->experts[(size_t)layer * (size_t)t->n_experts + (size_t)expert];
}

/* Checks one expert view against the config. */
int md_expert_check(const kn_expert *e, const md_config *cfg, int layer, int expert, mw_err *err);

#endif
