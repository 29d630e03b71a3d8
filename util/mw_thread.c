/* util/mw_thread.c — threads under the default scheduling policy (see mw_thread.h). */
#include "util/mw_thread.h"

#include <sched.h>
#include <stdbool.h>

int mw_thread_start_normal(pthread_t *th, void *(*fn)(void *), void *arg) {
    pthread_attr_t at;
    struct sched_param sp = {.sched_priority = 0};
    if (pthread_attr_init(&at) == 0) {
        bool ok = !pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED) &&
                  !pthread_attr_setschedpolicy(&at, SCHED_OTHER) &&
                  !pthread_attr_setschedparam(&at, &sp) && !pthread_create(th, &at, fn, arg);
        pthread_attr_destroy(&at);
        if (ok) return 0;
    }
    return pthread_create(th, NULL, fn, arg) ? -1 : 0;
}
