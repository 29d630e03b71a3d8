/* expert-node/en_device.h — where a node runs its experts: one row per device in en_device.c
 * (metal: the GPU through metal/; cpu: kernels/ on the node's thread pool), chosen by --device or,
 * by default, the first of them this machine has. A device names itself in the Welcome's backend
 * ("metal-apple-m2-ultra", "cpu-avx512") and may announce its measured read bandwidth. */
#ifndef EN_DEVICE_H
#define EN_DEVICE_H

#include <stdint.h>

#include "model/md_moe.h"
#include "util/mw_err.h"

struct en_node;

typedef struct en__device {
    const char *name;
    /* Opens the device over the node's mounted experts; sets the node's backend and bandwidth. */
    int (*open)(struct en_node *n, mw_err *err);
    /* md_moe_exec's contract, on the device. */
    int (*exec)(struct en_node *n, const md_moe_exec_args *a, float *out, uint64_t *read,
                mw_err *err);
    void (*close)(struct en_node *n);
} en__device;

/* Opens the device named by the node's --device (NULL: the first this machine has; a GPU that
 * fails to open then leaves the CPU, said on stderr). */
int en__device_open(struct en_node *n, mw_err *err);
/* The device row called name, or NULL; "auto" and NULL give NULL too. */
const en__device *en__device_find(const char *name);
/* The names, for messages: "metal, cpu". */
const char *en__device_names(void);

#endif
