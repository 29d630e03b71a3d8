/* tests/support/mwt_http.c — the raw-socket HTTP client and server launcher (mwt_http.h). */
#include "tests/support/mwt_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/mw_test.h"

int mwt_http_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int mwt_http_send(int fd, const char *data, size_t len) {
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Per connection, bytes read past the last response (a pipelined answer). */
typedef struct pending {
    int fd;
    char *buf;
    size_t len;
} pending;
static pending carry[64];

static pending *carry_of(int fd) {
    for (int i = 0; i < 64; i++)
        if (carry[i].fd == fd && carry[i].buf) return &carry[i];
    for (int i = 0; i < 64; i++)
        if (!carry[i].buf) {
            carry[i].fd = fd;
            return &carry[i];
        }
    return &carry[0];
}

/* Reads more into *buf; 0 on EOF, -1 on timeout or error. */
static ssize_t read_more(int fd, char **buf, size_t *len, size_t *cap, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, timeout_ms);
    if (rc <= 0) return -1;
    if (*cap - *len < 65536) {
        *cap = *cap * 2 + 65536;
        *buf = realloc(*buf, *cap + 1);
    }
    ssize_t n = recv(fd, *buf + *len, *cap - *len, 0);
    if (n < 0) return errno == ECONNRESET ? 0 : -1;
    *len += (size_t)n;
    (*buf)[*len] = 0;
    return n;
}

/* One response being read: what was received so far (buf[0..len), NUL-terminated) and how far
 * the response has been taken (pos). */
typedef struct reader {
    int fd, timeout_ms;
    char *buf;
    size_t len, cap, pos;
    bool eof;
} reader;

static void more(reader *rd) {
    rd->eof = read_more(rd->fd, &rd->buf, &rd->len, &rd->cap, rd->timeout_ms) <= 0;
}

/* Up to the end of the head, interim 1xx responses skipped; 0, or -1 with r->closed. */
static int read_head(reader *rd, mwt_resp *r) {
    char *end;
    for (;;) {
        while ((end = strstr(rd->buf, "\r\n\r\n")) && !strncmp(rd->buf, "HTTP/1.1 1", 10)) {
            size_t skip = (size_t)(end + 4 - rd->buf);
            memmove(rd->buf, rd->buf + skip, rd->len - skip + 1);
            rd->len -= skip;
        }
        if ((end = strstr(rd->buf, "\r\n\r\n"))) break;
        ssize_t n = read_more(rd->fd, &rd->buf, &rd->len, &rd->cap, rd->timeout_ms);
        if (n <= 0) {
            r->closed = n == 0;
            return -1;
        }
    }
    size_t head_len = (size_t)(end - rd->buf) + 4;
    r->head = strndup(rd->buf, head_len);
    sscanf(rd->buf, "HTTP/1.%*d %d", &r->status);
    rd->pos = head_len;
    return 0;
}

/* A body of `want` bytes (Content-Length), or what came before the connection closed. */
static void read_sized(reader *rd, size_t want, mwt_resp *r) {
    while (rd->len - rd->pos < want && !rd->eof) more(rd);
    size_t take = rd->len - rd->pos < want ? rd->len - rd->pos : want;
    r->body = realloc(r->body, take + 1);
    memcpy(r->body, rd->buf + rd->pos, take);
    r->body_len = take;
    rd->pos += take;
}

/* A chunked body, up to its last chunk (or as far as the connection gave it). */
static void read_chunked(reader *rd, mwt_resp *r) {
    for (;;) {
        char *crlf;
        while (!(crlf = strstr(rd->buf + rd->pos, "\r\n")) && !rd->eof) more(rd);
        if (!crlf) break;
        size_t sz = (size_t)strtoull(rd->buf + rd->pos, NULL, 16);
        size_t data = (size_t)(crlf + 2 - rd->buf);
        while (rd->len < data + sz + 2 && !rd->eof) more(rd);
        if (rd->len < data + sz + 2) break;
        r->body = realloc(r->body, r->body_len + sz + 1);
        memcpy(r->body + r->body_len, rd->buf + data, sz);
        r->body_len += sz;
        rd->pos = data + sz + 2;
        if (sz == 0) break;
    }
}

/* A body that runs until the connection closes. */
static void read_to_close(reader *rd, mwt_resp *r) {
    while (!rd->eof) more(rd);
    r->body = realloc(r->body, rd->len - rd->pos + 1);
    memcpy(r->body, rd->buf + rd->pos, rd->len - rd->pos);
    r->body_len = rd->len - rd->pos;
    rd->pos = rd->len;
}

/* What was received beyond this response waits for the next read on the same fd. */
static void keep_rest(const reader *rd) {
    if (rd->pos >= rd->len) return;
    pending *pc = carry_of(rd->fd);
    pc->buf = malloc(rd->len - rd->pos + 1);
    memcpy(pc->buf, rd->buf + rd->pos, rd->len - rd->pos);
    pc->buf[rd->len - rd->pos] = 0;
    pc->len = rd->len - rd->pos;
    pc->fd = rd->fd;
}

/* bodiless: the answer to a HEAD request; 1xx, 204 and 304 answers never have a body. */
static int read_response(int fd, mwt_resp *r, int timeout_ms, bool bodiless) {
    memset(r, 0, sizeof *r);
    pending *pc = carry_of(fd);
    reader rd = {.fd = fd, .timeout_ms = timeout_ms, .buf = pc->buf, .len = pc->len};
    rd.cap = pc->buf ? pc->len : 0;
    pc->buf = NULL;
    pc->len = 0;
    if (!rd.buf) {
        rd.cap = 65536;
        rd.buf = malloc(rd.cap + 1);
        rd.buf[0] = 0;
    }
    if (read_head(&rd, r)) {
        free(rd.buf);
        return -1;
    }
    const char *cl = mwt_resp_header(r, "Content-Length");
    const char *te = mwt_resp_header(r, "Transfer-Encoding");
    r->body = malloc(1);
    if (bodiless || r->status < 200 || r->status == 204 || r->status == 304)
        ;
    else if (cl)
        read_sized(&rd, (size_t)strtoull(cl, NULL, 10), r);
    else if (te && strstr(te, "chunked"))
        read_chunked(&rd, r);
    else
        read_to_close(&rd, r);
    r->body[r->body_len] = 0;
    const char *conn = mwt_resp_header(r, "Connection");
    r->closed = rd.eof || (conn && !strcasecmp(conn, "close"));
    keep_rest(&rd);
    free(rd.buf);
    return 0;
}

int mwt_http_read(int fd, mwt_resp *r, int timeout_ms) {
    return read_response(fd, r, timeout_ms, false);
}

int mwt_http_read_head(int fd, mwt_resp *r, int timeout_ms) {
    return read_response(fd, r, timeout_ms, true);
}

void mwt_resp_free(mwt_resp *r) {
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

bool mwt_http_eof(int fd, int timeout_ms) {
    char b[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0) return false;
        ssize_t n = recv(fd, b, sizeof b, 0);
        if (n <= 0) return true;
    }
}

int mwt_http_request(int port, const char *method, const char *path, const char *body,
                     mwt_resp *r) {
    int fd = mwt_http_connect(port);
    if (fd < 0) return -1;
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     method, path, body ? strlen(body) : 0);
    int rc = mwt_http_send(fd, head, (size_t)n);
    if (!rc && body) rc = mwt_http_send(fd, body, strlen(body));
    if (!rc) rc = mwt_http_read(fd, r, 120000);
    close(fd);
    return rc;
}

const char *mwt_resp_header(const mwt_resp *r, const char *name) {
    static char v[1024];
    size_t nl = strlen(name);
    for (const char *p = r->head ? strstr(r->head, "\r\n") : NULL; p && p[2];
         p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (!strncasecmp(line, name, nl) && line[nl] == ':') {
            const char *s = line + nl + 1;
            while (*s == ' ') s++;
            size_t l = strcspn(s, "\r");
            snprintf(v, sizeof v, "%.*s", (int)l, s);
            return v;
        }
    }
    return NULL;
}

static int serve_start(mwt_server *s, const char *model, const char *const *extra, int timeout_ms,
                       bool own_group) {
    memset(s, 0, sizeof *s);
    s->dir = mwt_tmpdir("serve");
    if (!s->dir) return -1;
    char ready[4096], log[4096];
    snprintf(ready, sizeof ready, "%s/ready", s->dir);
    snprintf(log, sizeof log, "%s/log", s->dir);
    s->log = strdup(log);
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)mwt_bin("coordinator");
    argv[n++] = "serve";
    argv[n++] = "--model";
    argv[n++] = (char *)model;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--ready-file";
    argv[n++] = ready;
    for (int i = 0; extra && extra[i] && n < 62; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    s->pid = own_group ? mwt_spawn_group(argv, log) : mwt_spawn(argv, log);
    if (s->pid < 0) return -1;
    s->url = mwt_wait_ready(ready, s->pid, timeout_ms);
    if (!s->url) {
        char *text = mwt_read_file(log, NULL);
        fprintf(stderr, "serve did not start:\n%s\n", text ? text : "");
        free(text);
        return -1;
    }
    const char *colon = strrchr(s->url, ':');
    s->port = colon ? atoi(colon + 1) : 0;
    return 0;
}

int mwt_serve_start(mwt_server *s, const char *model, const char *const *extra, int timeout_ms) {
    return serve_start(s, model, extra, timeout_ms, false);
}

int mwt_serve_start_group(mwt_server *s, const char *model, const char *const *extra,
                          int timeout_ms) {
    return serve_start(s, model, extra, timeout_ms, true);
}

int mwt_serve_stop(mwt_server *s, int timeout_ms) {
    int rc = 0; /* already stopped */
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        rc = mwt_wait(s->pid, timeout_ms);
        if (rc == -2) {
            kill(s->pid, SIGKILL);
            mwt_wait(s->pid, 5000);
        }
        if (rc != 0) {
            char *text = mwt_read_file(s->log, NULL);
            fprintf(stderr, "serve log:\n%s\n", text ? text : "");
            free(text);
        }
    }
    if (s->dir) mwt_rmrf(s->dir);
    free(s->dir);
    free(s->log);
    free(s->url);
    memset(s, 0, sizeof *s);
    return rc;
}
