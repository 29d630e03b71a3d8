/* expert-node/en_tools.h — the node's one-shot commands, run instead of serving: --self-test
 * (en_selftest.c) and --probe (en_probe.c). Both print to `out` and return the exit status. */
#ifndef EN_TOOLS_H
#define EN_TOOLS_H

#include <stdio.h>

#include "expert-node/en_opts.h"

/* The device's kernels (--device, default the node's) against the scalar reference of kernels/
 * on synthetic experts of every format, the differences per case, then the device's matvec rate
 * per format in GB/s. 0 when every case is within tolerance, 1 otherwise or on an error. */
int en_self_test(const en_opts *o, FILE *out);

/* This machine as a topology file wants it: on `out` one line of JSON, the host entry without its
 * endpoint and key (memory budget, the serving device's read bandwidth, cores, platform); on
 * stderr the figures behind it, one `key: value` per line (platform, CPUs, memory, the
 * instruction set, the CPU's read bandwidth with --threads threads, the GPU and its read
 * bandwidth, the device a node would serve from). */
int en_probe(const en_opts *o, FILE *out);

#endif
