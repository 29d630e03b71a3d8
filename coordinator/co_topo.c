/* coordinator/co_topo.c — the node list of a topology file (see co_topo.h). Every host is a node:
 * a host `vindex plan` gave no extents runs none and stays down (/health: degraded), so a
 * topology lists the hosts that serve. */
#include "coordinator/co_topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_topology.h"

int co_topo_nodes(const char *path, char **buf, const char **list, mw_err *err) {
    vx_topology t;
    if (vx_topology_load(path, &t, err)) return mw_err_wrap(err, "--topology %s", path);
    size_t cap = 1;
    for (int i = 0; i < t.n_hosts; i++)
        cap += strlen(t.hosts[i].endpoint) + strlen(t.hosts[i].key) + 2;
    char *b = malloc(cap);
    if (!b) {
        vx_topology_free(&t);
        return mw_errf(err, "out of memory");
    }
    size_t len = 0;
    b[0] = '\0';
    for (int i = 0; i < t.n_hosts; i++) {
        const vx_topo_host *h = &t.hosts[i];
        len += (size_t)snprintf(b + len, cap - len, "%s%s%s%s", i ? "," : "", h->endpoint,
                                h->key[0] ? "#" : "", h->key);
    }
    vx_topology_free(&t);
    if (!len) {
        free(b);
        return mw_errf(err, "--topology %s: no hosts", path);
    }
    free(*buf);
    *buf = b;
    *list = b;
    return 0;
}
