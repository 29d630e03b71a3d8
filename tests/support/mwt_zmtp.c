/* tests/support/mwt_zmtp.c — the raw ZMTP client (mwt_zmtp.h). RFC 23 (ZMTP 3.0): a 64-byte
 * greeting each way, READY commands carrying Socket-Type, then frames: flags (bit 0 MORE, bit 1
 * LONG, bit 2 COMMAND), a 1- or 8-byte big-endian size, the body. */
#include "tests/support/mwt_zmtp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int mwt_zmtp_write(int fd, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

int mwt_zmtp_frame(int fd, const void *data, size_t len, bool more) {
    uint8_t h[9];
    size_t n;
    if (len < 256) {
        h[0] = more ? 1 : 0;
        h[1] = (uint8_t)len;
        n = 2;
    } else {
        h[0] = (uint8_t)((more ? 1 : 0) | 2);
        for (int i = 0; i < 8; i++) h[1 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
        n = 9;
    }
    if (mwt_zmtp_write(fd, h, n)) return -1;
    return len ? mwt_zmtp_write(fd, data, len) : 0;
}

/* Reads exactly n bytes within timeout_ms. */
static int read_all(int fd, uint8_t *p, size_t n, int timeout_ms) {
    while (n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, timeout_ms) <= 0) return -1;
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int mwt_zmtp_connect(const char *endpoint, int timeout_ms) {
    signal(SIGPIPE, SIG_IGN);
    if (strncmp(endpoint, "tcp://", 6)) return -1;
    char host[256];
    snprintf(host, sizeof host, "%s", endpoint + 6);
    char *colon = strrchr(host, ':');
    if (!colon) return -1;
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    uint8_t g[64] = {0};
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3; /* version 3.0 */
    memcpy(g + 12, "NULL", 4);
    uint8_t peer[64];
    if (mwt_zmtp_write(fd, g, sizeof g) || read_all(fd, peer, sizeof peer, timeout_ms) ||
        peer[0] != 0xff || peer[9] != 0x7f || memcmp(peer + 12, "NULL", 4)) {
        close(fd);
        return -1;
    }
    /* READY: name, then Socket-Type = DEALER */
    uint8_t r[64];
    size_t n = 0;
    r[n++] = 4; /* command */
    r[n++] = 0; /* size, below */
    r[n++] = 5;
    memcpy(r + n, "READY", 5), n += 5;
    r[n++] = 11;
    memcpy(r + n, "Socket-Type", 11), n += 11;
    r[n++] = 0, r[n++] = 0, r[n++] = 0, r[n++] = 6;
    memcpy(r + n, "DEALER", 6), n += 6;
    r[1] = (uint8_t)(n - 2);
    uint8_t h[2];
    if (mwt_zmtp_write(fd, r, n) || read_all(fd, h, 2, timeout_ms) || !(h[0] & 4)) {
        close(fd);
        return -1;
    }
    uint8_t body[256];
    if (read_all(fd, body, h[1], timeout_ms) || h[1] < 6 || memcmp(body + 1, "READY", 5)) {
        close(fd);
        return -1;
    }
    return fd;
}

bool mwt_zmtp_closed(int fd, int timeout_ms) {
    uint8_t buf[4096];
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int rc = poll(&pf, 1, timeout_ms);
        if (rc <= 0) return false;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) return true;
    }
}
