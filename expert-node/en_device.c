/* expert-node/en_device.c — the node's devices, one row each (en_device.h): the GPU first, so a
 * Mac serves from Metal unless told otherwise, then the CPU, which every build has. */
#include "expert-node/en_device.h"
#include "expert-node/en_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "metal/mt_dev.h"

/* Bytes the GPU reads at open to measure its bandwidth: beyond any system-level cache. */
#define EN_GPU_BW_BYTES ((size_t)256 << 20)

static int cpu_open(struct en_node *n, mw_err *err) {
    (void)err;
    snprintf(n->backend, sizeof n->backend, "cpu-%s", kn_isa_name(kn_isa_active()));
    n->read_gbps = 0; /* not measured at start: --probe does */
    return 0;
}

static int cpu_exec(struct en_node *n, const md_moe_exec_args *a, float *out, uint64_t *read,
                    mw_err *err) {
    (void)n;
    return md_moe_exec(a, out, read, err);
}

static void cpu_close(struct en_node *n) {
    (void)n;
}

/* "metal-" and the GPU's name, lower case, every run of other characters one '-'. */
static void gpu_backend(char *dst, size_t cap, const char *gpu) {
    size_t len = (size_t)snprintf(dst, cap, "metal");
    bool dash = true;
    for (const char *p = gpu; *p && len + 2 < cap; p++) {
        if (isalnum((unsigned char)*p)) {
            if (dash) dst[len++] = '-';
            dst[len++] = (char)tolower((unsigned char)*p);
            dash = false;
        } else {
            dash = true;
        }
    }
    dst[len] = '\0';
}

static int gpu_open(struct en_node *n, mw_err *err) {
    if (mt_glu_check(&n->cfg.glu, err) ||
        mt_dev_open(mt_backend_gpu(), &n->table, EN_GPU_BW_BYTES, &n->mt, err))
        return -1;
    gpu_backend(n->backend, sizeof n->backend, mt_dev_name(n->mt));
    n->read_gbps = mt_dev_read_gbps(n->mt);
    return 0;
}

static int gpu_exec(struct en_node *n, const md_moe_exec_args *a, float *out, uint64_t *read,
                    mw_err *err) {
    return mt_moe_exec(n->mt, a, out, read, err);
}

static void gpu_close(struct en_node *n) {
    mt_dev_close(n->mt);
    n->mt = NULL;
}

static const en__device devices[] = {
    {"metal", gpu_open, gpu_exec, gpu_close},
    {"cpu", cpu_open, cpu_exec, cpu_close},
};
#define N_DEVICES (sizeof devices / sizeof devices[0])

const en__device *en__device_find(const char *name) {
    for (size_t i = 0; name && i < N_DEVICES; i++)
        if (!strcmp(devices[i].name, name)) return &devices[i];
    return NULL;
}

const char *en__device_names(void) {
    return "metal, cpu";
}

int en__device_open(struct en_node *n, mw_err *err) {
    const char *want = n->opts.device;
    if (want && strcmp(want, "auto")) {
        const en__device *d = en__device_find(want);
        if (!d) return mw_errf(err, "--device %s: expected %s or auto", want, en__device_names());
        if (d->open(n, err)) return mw_err_wrap(err, "--device %s", want);
        n->dev = d;
        return 0;
    }
    for (size_t i = 0; i < N_DEVICES; i++) {
        mw_err e;
        if (devices[i].open(n, &e) == 0) {
            n->dev = &devices[i];
            return 0;
        }
        if (i + 1 < N_DEVICES && mt_backend_gpu() && !n->opts.quiet) /* a Mac without its GPU */
            fprintf(stderr, "expert-node: %s unavailable (%s): trying %s\n", devices[i].name, e.msg,
                    devices[i + 1].name);
        if (i + 1 == N_DEVICES) return mw_errf(err, "%s", e.msg);
    }
    return mw_errf(err, "no device");
}
