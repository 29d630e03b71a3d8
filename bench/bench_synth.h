/* bench/bench_synth.h — what the benchmarks of models synthesized at published widths share
 * (bench_deepseek, bench_kimi): whether such a model fits this machine, the vindex its expert
 * nodes mount, and the 2-node loopback cluster that serves it. */
#ifndef BENCH_SYNTH_H
#define BENCH_SYNTH_H

#include <stddef.h>

#include "kernels/kn.h"
#include "model/md_model.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

/* Whether a model of need bytes fits dir's free disk (a fifth to spare) and 40 % of the memory;
 * -1, said on stderr in who's name, when it does not (the benchmark is then skipped). */
int bs_fits(const char *who, const char *dir, double need);

/* The vindex the nodes mount, in vx (path.vindex), extracted from the GGUF file path unless it is
 * there already (as in production: its fingerprint is stored, where every process would read a
 * GGUF file whole): 0, 1 when the extract failed. */
int bs_extract(const char *who, const char *path, char *vx, size_t vx_len);

/* The vindex vx opened without experts in *vsrc, and a 2-node loopback cluster on it for m in
 * *cluster: threads a node, pinned and bound, f16 rows, q8 numerics, deadlines for a loaded
 * machine. 0, or -1 with e set. */
int bs_loopback2(const char *vx, const md_model *m, int threads, kn_pool *pool, vx_source **vsrc,
                 md_expert_backend **cluster, mw_err *e);

#endif
