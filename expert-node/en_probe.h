/* expert-node/en_probe.h — `expert-node --probe`: what this machine brings to a fleet, measured
 * and printed as the host entry of a topology file (memory budget, read bandwidth, cores,
 * platform), for deploy/topologies and `vindex plan`. */
#ifndef EN_PROBE_H
#define EN_PROBE_H

#include <stdio.h>

/* Measures with `threads` threads and prints one JSON object on out; 0, or -1 after saying why
 * on stderr. */
int en_probe(int threads, FILE *out);

#endif
