/* util/mw_time.c — see mw_time.h. */
#include "util/mw_time.h"

#include <time.h>

uint64_t mw_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t mw_now_ms(void) {
    return (int64_t)(mw_now_ns() / 1000000);
}

double mw_now_s(void) {
    return (double)mw_now_ns() * 1e-9;
}
