/* vindex/vx_io.h — file plumbing for writing and checking a vindex: a write sink that hashes what
 * passes through it, whole-range hashing of a file, and fresh output directories. Private to
 * vindex/. */
#ifndef VX_IO_H
#define VX_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "util/mw_err.h"
#include "vindex/vx_hash.h"

typedef struct vx_sink {
    int fd;
    char path[4096];
    uint64_t pos;
    bool hash; /* keep running BLAKE2b and SHA-256 of everything written */
    vx_b2 b2;
    vx_sha sha;
    kn_pool *pool; /* optional: hashes run in parallel on it */
} vx_sink;

int vx_sink_open(vx_sink *s, const char *path, bool hash, mw_err *err);
int vx_sink_write(vx_sink *s, const void *p, uint64_t n, mw_err *err);
/* Same, also feeding the bytes to `extra` (a tensor's running digest; may be NULL), all the
 * hashes in parallel. */
int vx_sink_write_digest(vx_sink *s, const void *p, uint64_t n, vx_b2 *extra, mw_err *err);
/* Zero-fills to the next multiple of align. */
int vx_sink_pad(vx_sink *s, uint64_t align, mw_err *err);
/* Closes; when hashing, writes the digests (either may be NULL). */
int vx_sink_close(vx_sink *s, uint8_t b2[VX_DIGEST_BYTES], uint8_t sha[VX_DIGEST_BYTES],
                  mw_err *err);
/* Closes and removes the file (on a failed write). */
void vx_sink_abort(vx_sink *s);

/* Hashes bytes [off, off + len) of path (either digest may be NULL). `done`, when non-NULL, is
 * called after each chunk with the bytes hashed so far. */
int vx_hash_range(const char *path, uint64_t off, uint64_t len, uint8_t b2[VX_DIGEST_BYTES],
                  uint8_t sha[VX_DIGEST_BYTES], void (*done)(void *ctx, uint64_t n), void *ctx,
                  mw_err *err);

/* Creates dir, or accepts an existing empty directory. */
int vx_mkdir_fresh(const char *dir, mw_err *err);

#endif
