/* util/mw_notify.c — the service manager's notify datagrams (mw_notify.h): the address is built
 * once from $NOTIFY_SOCKET, so sending is a socket, a sendto and a close. */
#include "util/mw_notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct {
    int inited;
    struct sockaddr_un addr;
    socklen_t len; /* 0: no socket */
    uint64_t watchdog_usec;
} g;

/* "/run/systemd/notify" or "@abstract-name" into g.addr. */
static void parse_socket(const char *s) {
    const size_t n = strlen(s), room = sizeof g.addr.sun_path;
    if (n < 2 || (s[0] != '/' && s[0] != '@') || n > room - (s[0] == '/')) return;
    memset(&g.addr, 0, sizeof g.addr);
    g.addr.sun_family = AF_UNIX;
    memcpy(g.addr.sun_path, s, n);
    if (s[0] == '@') g.addr.sun_path[0] = 0; /* abstract: no terminating NUL in the length */
    g.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (s[0] == '/'));
}

void mw_notify_setup(const char *sock, const char *usec, const char *pid) {
    memset(&g, 0, sizeof g);
    g.inited = 1;
    if (sock) parse_socket(sock);
    if (usec && (!pid || strtol(pid, NULL, 10) == (long)getpid()))
        g.watchdog_usec = strtoull(usec, NULL, 10);
}

void mw_notify_init(void) {
    if (g.inited) return;
    mw_notify_setup(getenv("NOTIFY_SOCKET"), getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"));
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

int mw_notify(const char *msg) {
    if (!g.inited) mw_notify_init();
    if (!g.len) return 0;
    const int saved = errno;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rc = -1;
    if (fd >= 0) {
        rc = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&g.addr, g.len) ==
                     (ssize_t)strlen(msg)
                 ? 1
                 : -1;
        close(fd);
    }
    errno = saved;
    return rc;
}

int mw_notify_status(const char *fmt, ...) {
    char buf[512] = "STATUS=";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + 7, sizeof buf - 7, fmt, ap);
    va_end(ap);
    return mw_notify(buf);
}

uint64_t mw_notify_watchdog_usec(void) {
    if (!g.inited) mw_notify_init();
    return g.watchdog_usec;
}
