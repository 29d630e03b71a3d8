/* coordinator/co_backend.c — the backend table. "local" runs the experts in this process through
 * the same executor an expert node runs (model/md_local.h); "remote" sends them to expert nodes
 * (coordinator/co_cluster.h). */
#include "coordinator/co_backend.h"

#include <stdio.h>
#include <string.h>

#include "coordinator/co_cluster.h"
#include "model/md_local.h"

static int create_local(const co_backend_env *env, md_expert_backend **out, mw_err *err) {
    if (md_local_backend_new(env->src, &env->model->cfg, env->pool, out, err)) return -1;
    return env->opts->pin ? md_local_backend_pin(*out, err) : 0;
}

static const co_backend_kind kinds[] = {
    {"local", "experts run in this process", true, create_local, NULL},
    {"remote", "experts run on expert nodes (--nodes or --loopback)", false, co_cluster_create,
     co_cluster_report},
};

#define N_KINDS (sizeof kinds / sizeof kinds[0])

const co_backend_kind *co_backend_find(const char *name) {
    for (size_t i = 0; name && i < N_KINDS; i++)
        if (!strcmp(kinds[i].name, name)) return &kinds[i];
    return NULL;
}

const char *co_backend_names(void) {
    static char names[256];
    if (!names[0]) {
        size_t n = 0;
        for (size_t i = 0; i < N_KINDS && n < sizeof names; i++)
            n +=
                (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", kinds[i].name);
    }
    return names;
}
