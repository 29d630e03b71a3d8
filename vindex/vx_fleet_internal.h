/* vindex/vx_fleet_internal.h — `vindex plan`'s state between reading its inputs
 * (vx_fleet_plan.c) and writing the fleet's files (vx_fleet_write.c). Private to vindex/. */
#ifndef VX_FLEET_INTERNAL_H
#define VX_FLEET_INTERNAL_H

#include <stdio.h>

#include "util/mw_progress.h"
#include "vindex/vx_plan.h"
#include "vindex/vx_rstats.h"
#include "vindex/vx_source.h"
#include "vindex/vx_topology.h"

typedef struct vx__fleet {
    const vx_fleet_opts *o;
    const char *model; /* o->model, or the topology's model.path */
    vx_topology topo;
    vx_source *src;
    const char *fingerprint, *family;
    vx_rstats stats;
    bool have_stats;
    vx_plan_host hosts[VX_PLAN_MAX_HOSTS];
    uint64_t *ext;
    double *load;
    vx_plan_in in;
    vx_plan plan;
    double seconds;       /* the planner's time */
    mw_progress progress; /* a GGUF model's fingerprint */
    bool progress_on;
} vx__fleet;

/* Writes every file of the plan into f->o->out and the report on `report` (may be NULL). */
int vx__fleet_write(const vx__fleet *f, FILE *report, mw_err *err);
/* The report's text (malloc'ed). */
char *vx__fleet_report(const vx__fleet *f);

#endif
