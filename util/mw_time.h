/* util/mw_time.h — the monotonic clock every timer in the project reads: deadlines, per-phase
 * times in the reports, benchmarks. One helper, so every figure is on the same clock. */
#ifndef MW_TIME_H
#define MW_TIME_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC (not wall time: immune to clock changes). */
uint64_t mw_now_ns(void);
/* The same clock in milliseconds and in seconds. */
int64_t mw_now_ms(void);
double mw_now_s(void);

#endif
