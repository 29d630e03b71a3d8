/* vindex/vx_io.c — hashing write sinks, range hashing and output directories. */
#include "vindex/vx_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vindex/vx_map.h"

#define CHUNK (4u << 20)

int vx_sink_open(vx_sink *s, const char *path, bool hash, mw_err *err) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0) return mw_errf(err, "%s: cannot create: %s", path, strerror(errno));
    s->hash = hash;
    if (hash) {
        vx_b2_init(&s->b2);
        if (vx_sha_init(&s->sha)) {
            vx_sink_abort(s);
            return mw_errf(err, "%s: out of memory", path);
        }
    }
    return 0;
}

int vx_sink_write(vx_sink *s, const void *p, uint64_t n, mw_err *err) {
    return vx_sink_write_digest(s, p, n, NULL, err);
}

int vx_sink_write_digest(vx_sink *s, const void *p, uint64_t n, vx_b2 *extra, mw_err *err) {
    vx_hash_seg seg = {p, n};
    vx_hash_job jobs[3];
    size_t nj = 0;
    if (s->hash) {
        jobs[nj++] = (vx_hash_job){.sha = &s->sha, .segs = &seg, .n_segs = 1};
        jobs[nj++] = (vx_hash_job){.b2 = &s->b2, .segs = &seg, .n_segs = 1};
    }
    if (extra) jobs[nj++] = (vx_hash_job){.b2 = extra, .segs = &seg, .n_segs = 1};
    vx_hash_run(s->pool, jobs, nj);
    const uint8_t *c = p;
    while (n > 0) {
        ssize_t k = write(s->fd, c, n > CHUNK ? CHUNK : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return mw_errf(err, "%s: write failed: %s", s->path, strerror(errno));
        c += k;
        n -= (uint64_t)k;
        s->pos += (uint64_t)k;
    }
    return 0;
}

int vx_sink_pad(vx_sink *s, uint64_t align, mw_err *err) {
    static const uint8_t zeros[256];
    uint64_t pad = (align - s->pos % align) % align;
    while (pad > 0) {
        uint64_t k = pad < sizeof zeros ? pad : sizeof zeros;
        if (vx_sink_write(s, zeros, k, err)) return -1;
        pad -= k;
    }
    return 0;
}

int vx_sink_close(vx_sink *s, uint8_t b2[VX_DIGEST_BYTES], uint8_t sha[VX_DIGEST_BYTES],
                  mw_err *err) {
    bool hashed = true;
    if (s->hash) {
        uint8_t d[VX_DIGEST_BYTES];
        vx_b2_final(&s->b2, b2 ? b2 : d);
        hashed = vx_sha_final(&s->sha, sha ? sha : d) == 0;
    }
    int rc = close(s->fd);
    s->fd = -1;
    if (rc != 0) return mw_errf(err, "%s: close failed: %s", s->path, strerror(errno));
    if (!hashed) return mw_errf(err, "%s: SHA-256 failed", s->path);
    return 0;
}

void vx_sink_abort(vx_sink *s) {
    if (s->hash) vx_sha_free(&s->sha);
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    unlink(s->path);
}

int vx_hash_range(const char *path, uint64_t off, uint64_t len, uint8_t b2[VX_DIGEST_BYTES],
                  uint8_t sha[VX_DIGEST_BYTES], void (*done)(void *ctx, uint64_t n), void *ctx,
                  mw_err *err) {
    int fd = vx_open_file(path, NULL, err);
    if (fd < 0) return -1;
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return mw_errf(err, "%s: out of memory", path);
    }
    vx_b2 hb;
    vx_sha hs = {0};
    if (b2) vx_b2_init(&hb);
    int rc = sha && vx_sha_init(&hs) ? mw_errf(err, "%s: out of memory", path) : 0;
    for (uint64_t at = 0; at < len && rc == 0;) {
        size_t want = len - at < CHUNK ? (size_t)(len - at) : CHUNK;
        ssize_t k = pread(fd, buf, want, (off_t)(off + at));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            rc = mw_errf(err, "%s: read failed at %llu: %s", path, (unsigned long long)(off + at),
                         k == 0 ? "unexpected end of file" : strerror(errno));
            break;
        }
        if (b2) vx_b2_update(&hb, buf, (size_t)k);
        if (sha) vx_sha_update(&hs, buf, (size_t)k);
        at += (uint64_t)k;
        if (done) done(ctx, (uint64_t)k);
    }
    if (rc == 0 && b2) vx_b2_final(&hb, b2);
    if (rc == 0 && sha && vx_sha_final(&hs, sha)) rc = mw_errf(err, "%s: SHA-256 failed", path);
    vx_sha_free(&hs);
    free(buf);
    close(fd);
    return rc;
}

int vx_mkdir_fresh(const char *dir, mw_err *err) {
    if (mkdir(dir, 0755) == 0) return 0;
    if (errno != EEXIST) return mw_errf(err, "%s: cannot create: %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return mw_errf(err, "%s: exists and is not a directory", dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    if (n) return mw_errf(err, "%s: exists and is not empty", dir);
    return 0;
}
