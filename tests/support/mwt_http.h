/* tests/support/mwt_http.h — a small blocking HTTP/1.1 client over raw sockets for the server
 * tests: send any bytes (malformed ones included), read responses one by one (Content-Length or
 * chunked bodies), and start / stop a `coordinator serve` process on a free port. */
#ifndef MWT_HTTP_H
#define MWT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct mwt_resp {
    int status; /* 0: no response (closed or timed out) */
    char *head; /* status line and headers */
    char *body; /* decoded (chunked bodies joined) */
    size_t body_len;
    bool closed; /* the server closed the connection after it */
} mwt_resp;

/* Connects to 127.0.0.1:port; -1 on failure. */
int mwt_http_connect(int port);
int mwt_http_send(int fd, const char *data, size_t len);
/* Reads one response (timeout per read in ms). */
int mwt_http_read(int fd, mwt_resp *r, int timeout_ms);
/* Reads the answer to a HEAD request: its head only (the Content-Length is the GET answer's). */
int mwt_http_read_head(int fd, mwt_resp *r, int timeout_ms);
void mwt_resp_free(mwt_resp *r);
/* Whether the peer has closed (reads EOF within timeout_ms). */
bool mwt_http_eof(int fd, int timeout_ms);
/* One request on a fresh connection: method, path, JSON body (or NULL). */
int mwt_http_request(int port, const char *method, const char *path, const char *body, mwt_resp *r);
/* A header's value in r->head (static buffer) or NULL. */
const char *mwt_resp_header(const mwt_resp *r, const char *name);

typedef struct mwt_server {
    pid_t pid;
    int port;
    char *dir, *log, *url;
} mwt_server;

/* Starts `coordinator serve --model MODEL --listen 127.0.0.1:0 --ready-file ...` plus extra
 * arguments (NULL-terminated); waits until it is ready. */
int mwt_serve_start(mwt_server *s, const char *model, const char *const *extra, int timeout_ms);
/* The same, the server leading a process group of its own (mwt_spawn_group). */
int mwt_serve_start_group(mwt_server *s, const char *model, const char *const *extra,
                          int timeout_ms);
/* SIGTERM and wait; returns the exit status. */
int mwt_serve_stop(mwt_server *s, int timeout_ms);

#endif
