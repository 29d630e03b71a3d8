/* vindex/vx_map.c — opening, checking and mapping files read-only; confining a checkpoint
 * directory's files to it. */
#include "vindex/vx_map.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void fill_id(const struct stat *st, vx_file_id *id) {
    id->size = (uint64_t)st->st_size;
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int vx_open_file(const char *path, vx_file_id *id, mw_err *err) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; it does
     * nothing to reads of a regular file */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return mw_errf(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mw_errf(err, "%s: not a regular file", path);
    }
    if (id) fill_id(&st, id);
    return fd;
}

int vx_map_fd(int fd, const char *path, uint64_t off, uint64_t len, int advice, vx_map *m,
              mw_err *err) {
    memset(m, 0, sizeof *m);
    if (len == 0) return 0;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = off / page * page;
    if (off + len < off || off + len - start > SIZE_MAX)
        return mw_errf(err, "%s: cannot map %llu bytes at offset %llu: too large", path,
                       (unsigned long long)len, (unsigned long long)off);
    size_t n = (size_t)(off + len - start);
    void *a = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, (off_t)start);
    if (a == MAP_FAILED)
        return mw_errf(err, "%s: cannot map %llu bytes at offset %llu: %s", path,
                       (unsigned long long)len, (unsigned long long)off, strerror(errno));
    if (advice) madvise(a, n, advice);
    *m = (vx_map){(const uint8_t *)a + (off - start), len, a, n};
    vx_map_note(a, n, start, path);
    return 0;
}

int vx_map_file(const char *path, int advice, vx_map *m, vx_file_id *id, mw_err *err) {
    memset(m, 0, sizeof *m);
    vx_file_id fid;
    int fd = vx_open_file(path, &fid, err);
    if (fd < 0) return -1;
    int rc = vx_map_fd(fd, path, 0, fid.size, advice, m, err);
    close(fd);
    if (rc == 0 && id) *id = fid;
    return rc;
}

void vx_unmap(vx_map *m) {
    if (m->addr) {
        vx_map_forget(m->addr);
        munmap(m->addr, m->addr_len);
    }
    memset(m, 0, sizeof *m);
}

void vx_map_release(const void *p, uint64_t len) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + len) / page * page;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

int vx_file_unchanged(const char *path, const vx_file_id *id, mw_err *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return mw_errf(err, "%s: changed while being read (now %s)", path, strerror(errno));
    vx_file_id now;
    fill_id(&st, &now);
    if (now.dev != id->dev || now.ino != id->ino)
        return mw_errf(err, "%s: changed while being read (replaced by another file)", path);
    if (now.size != id->size)
        return mw_errf(err, "%s: changed while being read (%llu bytes, now %llu)", path,
                       (unsigned long long)id->size, (unsigned long long)now.size);
    if (now.mtime_ns != id->mtime_ns)
        return mw_errf(err, "%s: changed while being read (modified)", path);
    return 0;
}

char *vx_read_file(const char *path, uint64_t max, size_t *len, mw_err *err) {
    vx_file_id id;
    int fd = vx_open_file(path, &id, err);
    if (fd < 0) return NULL;
    char *buf = NULL;
    if (id.size > max)
        mw_errf(err, "%s: %llu bytes exceeds the %llu-byte limit", path,
                (unsigned long long)id.size, (unsigned long long)max);
    else if (!(buf = malloc((size_t)id.size + 1)))
        mw_errf(err, "%s: out of memory", path);
    size_t got = 0;
    while (buf && got < id.size) {
        ssize_t k = read(fd, buf + got, (size_t)id.size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            mw_errf(err, "%s: read failed: %s", path, k == 0 ? "file shrank" : strerror(errno));
            free(buf);
            buf = NULL;
        } else
            got += (size_t)k;
    }
    close(fd);
    if (buf) {
        buf[got] = '\0';
        *len = got;
    }
    return buf;
}

int vx_confine_init(vx_confine *c, const char *dir, mw_err *err) {
    c->blobs = NULL;
    if (!(c->root = realpath(dir, NULL)))
        return mw_errf(err, "%s: cannot resolve: %s", dir, strerror(errno));
    /* a hub cache snapshot: REPO/snapshots/REV, its files linking to REPO/blobs */
    char *copy = strdup(c->root);
    char *parent = copy ? dirname(copy) : NULL;
    if (parent && !strcmp(basename(parent), "snapshots")) {
        char blobs[PATH_MAX + 16];
        snprintf(blobs, sizeof blobs, "%s/../blobs", parent);
        c->blobs = realpath(blobs, NULL);
    }
    free(copy);
    return 0;
}

void vx_confine_free(vx_confine *c) {
    free(c->root);
    free(c->blobs);
    c->root = c->blobs = NULL;
}

static bool inside(const char *real, const char *dir) {
    size_t n = strlen(dir);
    if (n > 0 && dir[n - 1] == '/') return !strncmp(real, dir, n); /* dir is "/" */
    return !strncmp(real, dir, n) && real[n] == '/';
}

int vx_confine_check(const vx_confine *c, const char *path, mw_err *err) {
    char *real = realpath(path, NULL);
    if (!real) return mw_errf(err, "%s: cannot open: %s", path, strerror(errno));
    int rc = 0;
    if (!inside(real, c->root) && !(c->blobs && inside(real, c->blobs)))
        rc = mw_errf(err, "%s: resolves to %s, outside the checkpoint directory", path, real);
    free(real);
    return rc;
}
