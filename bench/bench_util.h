/* bench/bench_util.h — helpers every benchmark links (bench/bench_util.c): a monotonic clock,
 * order statistics, integer lists for options, the machine's last-level cache size, and the two
 * ceilings measured in the same run as the figures compared with them: a STREAM-style read
 * bandwidth and the int8 dot-product rate of the kernels' instruction. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Seconds on the project's monotonic clock (util/mw_time.h). */
double bu_now(void);
/* Sorts v (n values) and returns its minimum / median. */
double bu_min(double *v, int n);
double bu_median(double *v, int n);
/* Bytes of the last-level cache (sysconf / sysfs), or 32 MiB when unknown. */
size_t bu_llc_bytes(void);
/* Read bandwidth in GB/s (1e9 bytes/s): reps passes over a buffer of `bytes` with only the
 * hardware prefetchers and reps that also prefetch in software (as the streaming kernels do),
 * each pass timed in 8 MB slices (about one matmul call), each slice read by `threads` threads
 * summing their own contiguous shares (what a matmul's row split does); the best slice. */
double bu_read_bandwidth(size_t bytes, int threads, int reps);
/* The int8 multiply-adds per second (1e9 = one GMAC/s) that `threads` threads at once sustain with
 * the dot-product instruction of the active ISA's integer kernels (AVX-512: vpdpbusd on 512 bits,
 * AVX-VNNI: vpdpbusd on 256): twelve independent chains per thread, no memory operand, the best
 * of a few short runs. The ceiling a compute-bound phase is measured against; 0 where the active
 * ISA has no such instruction (the phase ratios are then not printed). *what names it. */
double bu_int8_dot_peak(int threads, const char **what);
/* Parses a comma-separated list of integers in [1, 4096] into out (at most max); returns how
 * many, or -1 when an entry is not such an integer. */
int bu_parse_ints(const char *s, int *out, int max);
/* A short description of the CPU (model name, logical CPUs) for report headers. */
const char *bu_cpu_name(void);

#endif
