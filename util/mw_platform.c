/* util/mw_platform.c — the platform-specific calls (mw_platform.h). Linux's extensions are used
 * here and nowhere else: this file alone asks for _GNU_SOURCE. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif

#include "util/mw_platform.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/prctl.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#include <stdint.h>
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
