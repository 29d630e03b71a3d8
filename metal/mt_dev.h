/* metal/mt_dev.h — the Metal expert path as the node uses it: a device holding the owned experts
 * (their weights read in place from the vindex mapping, wrapped as GPU buffers without a copy),
 * and an executor with md_moe_exec's contract that runs a layer's batch on it.
 *
 * A device runs on a backend (mt_backend.h): the GPU of a Darwin build, or the emulator in the
 * tests. Results follow the canonical order of kernels/ (docs/kernels.md): under the emulator they
 * are the CPU's bits exactly; on Apple hardware that depends on the GPU rounding as IEEE 754 says,
 * which `expert-node --self-test` checks there. */
#ifndef MT_DEV_H
#define MT_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "metal/mt_backend.h"
#include "model/md_expert_table.h"
#include "model/md_moe.h"
#include "util/mw_err.h"

typedef struct mt_dev mt_dev;

/* Opens a device on `be` for the experts loaded in t (which must outlive it): checks that every
 * weight has a Metal kernel (MXFP4, Q8_0, Q4_K, Q6_K; biases of any computable type), wraps the
 * weights, and, with bw_bytes > 0, measures the device's read bandwidth over that many bytes. */
int mt_dev_open(const mt_backend *be, const md_expert_table *t, size_t bw_bytes, mt_dev **out,
                mw_err *err);
void mt_dev_close(mt_dev *d);

/* The GPU's name, and its read bandwidth measured at open in GB/s (0 when not measured). */
const char *mt_dev_name(const mt_dev *d);
double mt_dev_read_gbps(const mt_dev *d);

/* Whether the kernels read weights of type t (as gate, up or down). */
bool mt_type_supported(kn_type t);
/* 0 when the GLU policy has a Metal kernel, else -1 with err naming it. */
int mt_glu_check(const kn_glu *glu, mw_err *err);

/* md_moe_exec on the device: the same arguments (lookup checks ownership and names the expert
 * views, which must be the table's), the same output, the same weight-byte count. */
int mt_moe_exec(mt_dev *d, const md_moe_exec_args *a, float *out, uint64_t *weight_bytes,
                mw_err *err);

/* One matrix of a loaded expert (0 gate, 1 up, 2 down) against T rows of X, without bias: Y is
 * T rows of its outputs, as kn_matmul gives them. The tests and the self-test run each kernel
 * variant with it. *ns: the device's time (may be NULL). */
int mt_matmul(mt_dev *d, int layer, int expert, int which, const float *X, int64_t T, float *Y,
              kn_numerics num, mt_variant v, uint64_t *ns, mw_err *err);

/* The names of every kernel the host dispatches (up to cap of them); the number there are. A
 * backend compiles them all at open, and the emulator test checks each is in the source. */
int mt_kernel_names(const char **names, int cap);

/* Reads `bytes` on the device (best of three passes): GB/s (1e9 bytes/s) in *gbps. */
int mt_dev_measure(mt_dev *d, size_t bytes, double *gbps, mw_err *err);

#endif
