/* vindex/vx_topology.h — the topology file: one JSON document describing a fleet (its expert
 * hosts with their memory budget, read bandwidth, cores, platform and CURVE key; the links between
 * the coordinators and the hosts; the coordinators; the model; the replication policy). `vindex
 * plan` places the experts from it, deploy/moewire starts the fleet from it, and the coordinator
 * reads its node list from it. Untrusted input: every name, number and key is checked, unknown
 * keys are errors (a misspelt key must not silently fall back to a default). The schema is
 * documented in docs/operations.md. */
#ifndef VX_TOPOLOGY_H
#define VX_TOPOLOGY_H

#include <stdbool.h>
#include <stdint.h>

#include "util/mw_err.h"

#define VX_TOPO_MAX_HOSTS  64 /* a plan's owner sets are 64-bit masks */
#define VX_TOPO_MAX_COORDS 64
#define VX_TOPO_NAME_MAX   64
#define VX_TOPO_KEY_Z85    40 /* a CURVE public key in Z85 */

/* What a platform means for running a node there (a table row in vx_topology.c). */
typedef struct vx_platform {
    const char *name;    /* "linux-x86_64", "linux-aarch64", "darwin-arm64" */
    const char *service; /* how a node runs there: "systemd" or "launchd" */
} vx_platform;

typedef struct vx_link {
    double rtt_us; /* round trip, microseconds */
    double gbit;   /* bandwidth, Gbit/s */
} vx_link;

typedef struct vx_topo_host {
    char name[VX_TOPO_NAME_MAX + 1];
    char *endpoint;      /* the node's ZeroMQ endpoint: tcp://ADDRESS:PORT */
    double memory_bytes; /* the budget for its expert extents */
    double read_gbs;     /* its read bandwidth, GB/s (expert-node --probe) */
    int cores;           /* compute threads */
    const vx_platform *platform;
    char key[VX_TOPO_KEY_Z85 + 1]; /* its CURVE public key, "" when none (loopback only) */
    char *vindex;                  /* the model's path on that host (default: model.path) */
    vx_link link;                  /* to the (first) coordinator */
} vx_topo_host;

typedef struct vx_topo_coord {
    char name[VX_TOPO_NAME_MAX + 1];
    char *address; /* its host's address */
    char *listen;  /* serve's HOST:PORT */
    double read_gbs;
    int cores;
    char key[VX_TOPO_KEY_Z85 + 1];
} vx_topo_coord;

typedef struct vx_topology {
    char *path;
    char sha256[65]; /* of the file as read */
    char name[VX_TOPO_NAME_MAX + 1];
    char *model_path;
    char *fingerprint; /* the model's, when the file pins it ("" otherwise) */
    char *wire;        /* the row codec the coordinators use ("f16" by default) */
    int n_hosts;
    vx_topo_host *hosts;
    int n_coords;
    vx_topo_coord *coords;
    /* replication policy */
    int min_owners, max_owners; /* owners per expert: at least, at most */
    double replica_memory;      /* share of the memory left after min_owners copies that hot
                                   replicas may take, 0 .. 1 */
} vx_topology;

/* Reads and checks path. */
int vx_topology_load(const char *path, vx_topology *t, mw_err *err);
void vx_topology_free(vx_topology *t);
/* Whether a host's endpoint is on this machine (127.0.0.0/8, localhost, [::1], ipc://). */
bool vx_topo_is_local(const vx_topo_host *h);
/* The platform row of a name, NULL when unknown; the names joined by sep into buf. */
const vx_platform *vx_platform_find(const char *name);
void vx_platform_names(char *buf, size_t n, const char *sep);

#endif
