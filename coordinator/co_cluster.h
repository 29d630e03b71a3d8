/* coordinator/co_cluster.h — the "remote" row of the backend table: builds the remote expert
 * backend from the coordinator's options, over the nodes of --nodes or over a --loopback cluster
 * it starts (and stops when the backend is destroyed, whatever path that is). */
#ifndef CO_CLUSTER_H
#define CO_CLUSTER_H

#include <stdio.h>

#include "coordinator/co_backend.h"

int co_cluster_create(const co_backend_env *env, md_expert_backend **out, mw_err *err);
/* The remote backend's movement report (co_remote_report). */
void co_cluster_report(const md_expert_backend *b, FILE *f);

#endif
