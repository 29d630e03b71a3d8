/* coordinator/co_topo.h — a coordinator's node list out of a topology file (vindex/vx_topology.h):
 * `--topology FILE` on generate and serve, read again by serve on SIGHUP. */
#ifndef CO_TOPO_H
#define CO_TOPO_H

#include "util/mw_err.h"

/* The topology's hosts as a --nodes list, in the file's order, each "ENDPOINT#KEY" when the host
 * has a CURVE key: *list points into *buf (replaced). */
int co_topo_nodes(const char *path, char **buf, const char **list, mw_err *err);

#endif
