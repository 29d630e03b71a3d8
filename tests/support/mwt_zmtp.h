/* tests/support/mwt_zmtp.h — a raw ZMTP 3.0 client over a plain TCP socket, for tests that must
 * send what libzmq never would: a message whose parts never end, thousands of parts, a NULL
 * handshake to a CURVE server. */
#ifndef MWT_ZMTP_H
#define MWT_ZMTP_H

#include <stdbool.h>
#include <stddef.h>

/* Connects to "tcp://HOST:PORT" and performs a NULL-mechanism handshake as a DEALER. Returns the
 * socket, or -1 (connect failed, or the peer did not answer the greeting with NULL and READY
 * within timeout_ms). SIGPIPE is ignored from then on: a write to a closed peer fails. */
int mwt_zmtp_connect(const char *endpoint, int timeout_ms);
/* Writes one frame (flags MORE when more); -1 when the peer is gone. */
int mwt_zmtp_frame(int fd, const void *data, size_t len, bool more);
/* Writes bytes as they are; -1 when the peer is gone. */
int mwt_zmtp_write(int fd, const void *data, size_t len);
/* Waits up to timeout_ms for the peer to close the connection (reads and discards); true when it
 * did. */
bool mwt_zmtp_closed(int fd, int timeout_ms);

#endif
