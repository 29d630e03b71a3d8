/* bench/bench_util.h — helpers every benchmark links (bench/bench_util.c): a monotonic clock,
 * order statistics, integer lists for options, the machine's last-level cache size, and a
 * STREAM-style read bandwidth measured in the same run as the figures compared with it. */
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
/* Parses a comma-separated list of integers in [1, 4096] into out (at most max); returns how
 * many, or -1 when an entry is not such an integer. */
int bu_parse_ints(const char *s, int *out, int max);
/* A short description of the CPU (model name, logical CPUs) for report headers. */
const char *bu_cpu_name(void);

#endif
