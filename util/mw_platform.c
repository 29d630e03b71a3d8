/* util/mw_platform.c — the platform-specific calls (mw_platform.h). Linux's extensions are used
 * here and nowhere else: this file alone asks for _GNU_SOURCE. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif

#include "util/mw_platform.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#include <stdint.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

int mw_pipe_nonblock(int fds[2]) {
#if defined(__linux__)
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
#else
    if (pipe(fds) != 0) return -1;
    for (int i = 0; i < 2; i++)
        if (fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) != 0 ||
            fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
            close(fds[0]);
            close(fds[1]);
            return -1;
        }
    return 0;
#endif
}

int mw_self_exe(char *buf, size_t cap) {
    if (cap < 2) return -1;
#if defined(__linux__)
    const ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    return 0;
#elif defined(__APPLE__)
    uint32_t size = (uint32_t)cap;
    return _NSGetExecutablePath(buf, &size) == 0 ? 0 : -1;
#else
    (void)buf;
    return -1;
#endif
}

int mw_die_with_parent(int sig) {
#if defined(__linux__)
    return prctl(PR_SET_PDEATHSIG, sig) == 0 ? 0 : -1;
#else
    (void)sig;
    return -1;
#endif
}

int mw_batch_policy(void) {
#if defined(SCHED_BATCH)
    return SCHED_BATCH;
#else
    return -1;
#endif
}

/* ---- CPUs ---------------------------------------------------------------------------------- */

bool mw_cpu_arm_dotprod(void) {
#if defined(__aarch64__) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__aarch64__) && defined(__APPLE__)
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &len, NULL, 0) == 0 && v;
#else
    return false;
#endif
}

int mw_cpus_allowed(int *ids, int cap) {
    int n = 0;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < cap; c++)
            if (CPU_ISSET(c, &set)) ids[n++] = c;
#else
    (void)ids, (void)cap;
#endif
    return n;
}

int mw_thread_bind_cpu(pthread_t t, int cpu) {
#if defined(__linux__)
    if (cpu < 0 || cpu >= CPU_SETSIZE) return EINVAL;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(t, sizeof one, &one);
#else
    (void)t, (void)cpu;
    return 0;
#endif
}

int mw_thread_nice(int nice) {
#if defined(__linux__)
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
#else
    (void)nice;
    return -1;
#endif
}

/* ---- memory ------------------------------------------------------------------------------- */

void *mw_map_grow(void *p, size_t old, size_t bytes) {
    void *q;
#if defined(__linux__)
    if (p && old) {
        q = mremap(p, old, bytes, MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : q;
    }
#endif
    q = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    if (q == MAP_FAILED) return NULL;
    if (p && old) {
        memcpy(q, p, old);
        munmap(p, old);
    }
    return q;
}

/* ---- TCP ---------------------------------------------------------------------------------- */

#if defined(__linux__)
/* The end of TCP_INFO's field f: a kernel that fills less of the struct predates it. */
#define TCP_INFO_END(f) (offsetof(struct tcp_info, f) + sizeof(((struct tcp_info *)0)->f))

/* The connection's TCP_INFO, of which the caller reads the fields before byte `need`. */
static int read_tcp_info(int fd, struct tcp_info *ti, size_t need) {
    socklen_t len = sizeof *ti;
    memset(ti, 0, sizeof *ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) != 0 || len < need) return -1;
    return 0;
}
#endif

bool mw_tcp_counts(void) {
#if defined(__linux__)
    return true;
#else
    return false;
#endif
}

int mw_tcp_received(int fd, uint64_t *bytes) {
#if defined(__linux__)
    struct tcp_info ti;
    if (read_tcp_info(fd, &ti, TCP_INFO_END(tcpi_bytes_received))) return -1;
    int queued = 0;
    if (ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0) queued = 0;
    *bytes =
        ti.tcpi_bytes_received > (uint64_t)queued ? ti.tcpi_bytes_received - (uint64_t)queued : 0;
    return 0;
#else
    (void)fd, (void)bytes;
    return -1;
#endif
}

int mw_tcp_acked(int fd, uint64_t *bytes) {
#if defined(__linux__)
    struct tcp_info ti;
    if (read_tcp_info(fd, &ti, TCP_INFO_END(tcpi_bytes_acked))) return -1;
    *bytes = ti.tcpi_bytes_acked;
    return 0;
#else
    (void)fd, (void)bytes;
    return -1;
#endif
}

void mw_tcp_abort(int fd) {
    /* A shutdown(SHUT_RD) alone would let the owner go on reading what keeps arriving until it
     * once finds the queue empty. */
    struct sockaddr sa = {.sa_family = AF_UNSPEC};
    if (connect(fd, &sa, sizeof sa) != 0) {
        /* a reset, not a FIN, once the owner closes it: with its window closed a flooding peer
         * would otherwise wait in send() until the kernel gives up the half-closed connection */
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        shutdown(fd, SHUT_RD);
    }
}
