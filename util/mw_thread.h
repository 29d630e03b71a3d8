/* util/mw_thread.h — threads that must answer promptly whatever their process runs under: an
 * expert node switches itself to SCHED_BATCH (its threads never preempt a running one), which a
 * thread it starts would inherit; a watcher or a liveness responder must not wait a full time
 * slice of every runnable thread to be scheduled. */
#ifndef MW_THREAD_H
#define MW_THREAD_H

#include <pthread.h>

/* pthread_create under the default policy (SCHED_OTHER, priority 0) rather than the caller's; the
 * caller's attributes when the system refuses that. 0, or -1. */
int mw_thread_start_normal(pthread_t *th, void *(*fn)(void *), void *arg);

#endif
