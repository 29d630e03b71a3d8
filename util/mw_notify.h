/* util/mw_notify.h — telling a service manager how a process is doing, systemd's notify protocol
 * written by hand (one datagram per message, no libsystemd): READY=1 once a service is bound and
 * mounted, STATUS=… while it loads, WATCHDOG=1 while it is alive, STOPPING=1 when it shuts down.
 * The socket is $NOTIFY_SOCKET: an absolute path, or an abstract name written with a leading '@'.
 * Without it every call does nothing, so programs call them unconditionally. */
#ifndef MW_NOTIFY_H
#define MW_NOTIFY_H

#include <stdint.h>

/* Reads $NOTIFY_SOCKET (and $WATCHDOG_USEC / $WATCHDOG_PID) once and takes them out of the
 * environment, so processes this one starts (loopback nodes) do not speak for it. Later calls
 * (and mw_notify before any) do nothing more. */
void mw_notify_init(void);
/* The same from given values instead of the environment (the tests): a socket ("/path",
 * "@abstract" or NULL), WATCHDOG_USEC and WATCHDOG_PID (either may be NULL). */
void mw_notify_setup(const char *sock, const char *usec, const char *pid);
/* Sends one message ("READY=1", "STATUS=mounting", "READY=1\nSTATUS=serving"): 1 sent, 0 when
 * there is no socket, -1 when sending failed. Async-signal-safe once mw_notify_init has run. */
int mw_notify(const char *msg);
/* STATUS=<text>, formatted. */
int mw_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The watchdog interval the manager asked this process for, in microseconds (0: none); send
 * WATCHDOG=1 at least twice per interval. */
uint64_t mw_notify_watchdog_usec(void);

#endif
