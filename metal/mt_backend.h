/* metal/mt_backend.h — what runs the Metal kernels: a list of dispatches over a few buffers. Two
 * implement it: the Darwin GPU (mt_metal.m, Objective-C, built only on a Mac) and the emulator
 * (metal/emu/, the kernels compiled as C++ and run on the CPU, for the tests). Everything else of
 * the Metal path — which kernels, which buffers, the grid — is portable C in mt_exec.c, so what
 * the tests run here is what a Mac runs, but for these few calls. */
#ifndef MT_BACKEND_H
#define MT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "metal/mt_args.h"
#include "util/mw_err.h"

/* A buffer binding: a region of memory the backend wrapped (index >= 0), the scratch buffer, or
 * nothing (the backend binds something harmless: the kernel does not read it). */
#define MT_BUF_SCRATCH (-1)
#define MT_BUF_NONE    (-2)
typedef struct mt_bind {
    int buf;
    uint64_t off;
} mt_bind;

/* The kernels' buffer indices after the argument block (buffer 0), in MT_PARAMS order. */
enum { MT_B_W, MT_B_X, MT_B_Y, MT_B_IX, MT_B_BIAS, MT_N_BINDS };

/* One kernel launch: grid[0] x grid[1] threadgroups of MT_TG_THREADS threads each. */
typedef struct mt_dispatch {
    const char *kernel; /* its name in mt_kernels.metal */
    mt_args args;
    mt_bind bind[MT_N_BINDS];
    uint32_t grid[2];
    uint32_t tg_bytes; /* threadgroup memory at index 0 (the backend rounds it up to 16) */
} mt_dispatch;

/* Host memory the backend wraps without copying: page-aligned base and length. */
typedef struct mt_region {
    const void *base;
    size_t len;
} mt_region;

typedef struct mt_backend_info {
    char device[64];   /* the GPU's name ("Apple M2 Ultra"), or the emulator's */
    size_t max_buffer; /* the largest buffer it can wrap, bytes */
} mt_backend_info;

typedef struct mt_backend {
    const char *name; /* "metal", "emulator" */
    /* Opens the device: 0, or -1 with err (no GPU). */
    int (*open)(void **impl, mt_backend_info *info, mw_err *err);
    /* Wraps n regions as buffers 0 .. n-1 (replacing any wrapped before), without copying. */
    int (*wrap)(void *impl, const mt_region *r, int n, mw_err *err);
    /* The host address of the scratch buffer, at least `bytes` long (64-byte aligned, CPU and GPU
     * share it). Growing it may move it and drop its contents; NULL with err on failure. */
    void *(*scratch)(void *impl, size_t bytes, mw_err *err);
    /* Runs the dispatches in order, each seeing all the writes of those before it, and returns
     * when they are done; *ns gets the time the device spent on them. */
    int (*run)(void *impl, const mt_dispatch *d, int n, uint64_t *ns, mw_err *err);
    void (*close)(void *impl);
} mt_backend;

/* Which kernel a Q8-mode matmul runs: matvec at T = 1 and tiled beyond (AUTO), or one of them at
 * every T (the tests and the self-test run both). */
typedef enum mt_variant { MT_AUTO = 0, MT_MATVEC, MT_TILED } mt_variant;

/* The GPU of this build: Metal on Darwin, NULL elsewhere. */
const mt_backend *mt_backend_gpu(void);

#endif
