/* util/mw_platform.h — the calls that differ between Linux and the other POSIX systems moewire
 * builds on (macOS), behind one face: everything else in the tree is POSIX.1-2008 plus the BSD
 * interfaces macOS has, which `make posix-check` enforces. Each call says what it does where the
 * system has no equivalent. */
#ifndef MW_PLATFORM_H
#define MW_PLATFORM_H

#include <stddef.h>

/* A pipe whose ends are non-blocking and close on exec: pipe2 on Linux, pipe and fcntl elsewhere
 * (not atomic with a concurrent fork there: callers create it before starting children). */
int mw_pipe_nonblock(int fds[2]);

/* The running executable's path into buf: /proc/self/exe on Linux, _NSGetExecutablePath on
 * macOS. 0, or -1 where it cannot be found. */
int mw_self_exe(char *buf, size_t cap);

/* Asks the kernel to send sig to the calling process when its parent dies (Linux's
 * PR_SET_PDEATHSIG; it survives exec). Async-signal-safe, for a child between fork and exec. -1
 * elsewhere: there a child outlives a parent that is killed without cleaning up. */
int mw_die_with_parent(int sig);

/* The scheduling policy a thread that must never preempt a running one takes (Linux's
 * SCHED_BATCH), or -1 where the system has none (then callers keep the default policy). */
int mw_batch_policy(void);

#endif
