/* util/mw_platform.h — the calls that differ between Linux and the other POSIX systems moewire
 * builds on (macOS), behind one face: everything else in the tree is POSIX.1-2008 plus the BSD
 * interfaces macOS has, which `make posix-check` enforces. Each call says what it does where the
 * system has no equivalent. */
#ifndef MW_PLATFORM_H
#define MW_PLATFORM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- CPUs ---------------------------------------------------------------------------------- */

/* Whether this is an aarch64 CPU with the Armv8.2 dot-product instructions the NEON kernels use
 * (Linux: HWCAP_ASIMDDP; macOS: hw.optional.arm.FEAT_DotProd). false on other CPUs and systems. */
bool mw_cpu_arm_dotprod(void);

/* The ids of the CPUs this process may run on (its affinity mask: sched_getaffinity on Linux),
 * at most cap of them, in increasing order. Their count, or 0 where the system does not say
 * (then every online CPU may be used). */
int mw_cpus_allowed(int *ids, int cap);

/* Binds thread t to CPU cpu (pthread_setaffinity_np on Linux). 0, or an errno value. A documented
 * no-op that returns 0 elsewhere: macOS has no way to bind a thread to a core (its affinity tags
 * are hints, and Apple silicon ignores them), and a node there runs unbound. */
int mw_thread_bind_cpu(pthread_t t, int cpu);

/* Lowers the calling thread's scheduling priority to nice value `nice` (Linux, where a thread's
 * nice value is its own: setpriority on its thread id). Nothing elsewhere, where a nice value
 * belongs to the whole process: -1 then. */
int mw_thread_nice(int nice);

/* ---- memory ------------------------------------------------------------------------------- */

/* An anonymous private read-write mapping of old bytes (p, or NULL and 0 for none yet) grown to
 * bytes > old, its contents kept and the new pages untouched: mremap on Linux (no copy), a new
 * mapping, a copy and an munmap elsewhere. The new mapping, or NULL (p is still valid then). */
void *mw_map_grow(void *p, size_t old, size_t bytes);

/* ---- TCP ---------------------------------------------------------------------------------- */

/* Whether mw_tcp_received and mw_tcp_acked report anything on this system (Linux: TCP_INFO). */
bool mw_tcp_counts(void);

/* Bytes the application has read from TCP connection fd: what the kernel received minus what it
 * still queues (TCP_INFO's bytes_received and SIOCINQ). -1 when fd is not a TCP socket (any more)
 * or where the system does not count (mw_tcp_counts). */
int mw_tcp_received(int fd, uint64_t *bytes);

/* Bytes of fd's stream the peer has acknowledged (TCP_INFO's bytes_acked); -1 as above. */
int mw_tcp_acked(int fd, uint64_t *bytes);

/* Drops TCP connection fd at once, the descriptor left to its owner: what the kernel still holds
 * of the stream is discarded and the owner's next read fails. Linux: connect() to AF_UNSPEC
 * disconnects the socket. Where that fails (other systems): a zero linger, so the owner's close
 * sends a reset rather than a FIN, and shutdown(SHUT_RD). */
void mw_tcp_abort(int fd);

#endif
