/* coordinator/co_backend.h — the expert backends the coordinator can run with, as a table:
 * --experts NAME picks a row, and the row builds an md_expert_backend for the loaded model. */
#ifndef CO_BACKEND_H
#define CO_BACKEND_H

#include <stdio.h>

#include "coordinator/co_cli.h"
#include "kernels/kn.h"
#include "model/md_model.h"
#include "model/md_moe.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

/* What a backend may use to build itself. */
typedef struct co_backend_env {
    const co_opts *opts;
    const vx_source *src;
    const md_model *model;
    kn_pool *pool;
} co_backend_env;

typedef struct co_backend_kind {
    const char *name;
    const char *help;
    /* Whether the coordinator must map the source's experts (true for in-process execution). */
    bool needs_local_experts;
    int (*create)(const co_backend_env *env, md_expert_backend **out, mw_err *err);
    /* Optional end-of-run report (wire and movement figures); NULL when there is none. */
    void (*report)(const md_expert_backend *b, FILE *f);
} co_backend_kind;

const co_backend_kind *co_backend_find(const char *name);
const char *co_backend_names(void);

#endif
