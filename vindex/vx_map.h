/* vindex/vx_map.h — the one way vindex/ opens and maps a file it reads: safetensors and GGUF
 * inputs whole, a vindex's dense and expert files whole (verify) or by extent runs (mount).
 * Opening never blocks (a FIFO is refused, not waited on), only regular files are accepted, and
 * every fault is an error naming the file. Mappings are read-only and private. Private to
 * vindex/. */
#ifndef VX_MAP_H
#define VX_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

/* One version of a file: a rewrite in place changes its size or mtime, a replacement its inode. */
typedef struct vx_file_id {
    uint64_t size, dev, ino;
    int64_t mtime_ns;
} vx_file_id;

/* Bytes [off, off + len) of a file. */
typedef struct vx_map {
    const uint8_t *p; /* NULL when len is 0 */
    uint64_t len;
    void *addr; /* the page-aligned mapping holding them, for munmap */
    size_t addr_len;
} vx_map;

/* Opens path read-only and checks it is a regular file; *id (may be NULL) describes it. Returns
 * the descriptor, or -1 with "PATH: cannot open: ..." / "PATH: not a regular file". */
int vx_open_file(const char *path, vx_file_id *id, mw_err *err);
/* Maps [off, off + len) of fd (opened on path); advice is an madvise() advice (0: the default). */
int vx_map_fd(int fd, const char *path, uint64_t off, uint64_t len, int advice, vx_map *m,
              mw_err *err);
/* The whole file: opened, checked and mapped (the descriptor is not kept). */
int vx_map_file(const char *path, int advice, vx_map *m, vx_file_id *id, mw_err *err);
/* Unmaps; a zeroed or already unmapped vx_map is fine. */
void vx_unmap(vx_map *m);
/* Notes / forgets a mapping for the SIGBUS handler (vx_sigbus.c): bytes [p, p + len) hold the
 * file's bytes from offset off. vx_map_fd and vx_unmap call them. */
void vx_map_note(const void *p, size_t len, uint64_t off, const char *path);
void vx_map_forget(const void *p);
/* Hands back the pages wholly inside [p, p + len) of a read-only mapping, for bytes read once:
 * they stay in the page cache, and a later read faults them in again. */
void vx_map_release(const void *p, uint64_t len);

/* 0 when path still is the version id describes, else -1 with "PATH: changed while being read
 * (...)". A mapped file rewritten in place or shrunk under a reader changes the bytes it reads
 * (a shrink past a page being read kills the reader with SIGBUS); a replaced one does not, but
 * is refused too since the path no longer names what was read. */
int vx_file_unchanged(const char *path, const vx_file_id *id, mw_err *err);

/* The files a checkpoint directory may contribute: a path must resolve (symlinks followed) to a
 * file inside the directory — or, when the directory is a Hugging Face hub cache snapshot
 * (…/snapshots/REV, whose files are links to …/blobs/HASH), inside the repository's blobs/ — so a
 * link cannot pull a file from elsewhere on the machine into a vindex. */
typedef struct vx_confine {
    char *root;  /* the directory's real path */
    char *blobs; /* the hub cache's blobs/ directory, or NULL */
} vx_confine;

int vx_confine_init(vx_confine *c, const char *dir, mw_err *err);
void vx_confine_free(vx_confine *c);
/* 0, or -1 with "PATH: resolves to REAL, outside the checkpoint directory" (or "PATH: cannot
 * open: ..." when it does not resolve). */
int vx_confine_check(const vx_confine *c, const char *path, mw_err *err);

/* Reads a whole small file (a JSON document) of at most max bytes into a malloc'ed,
 * NUL-terminated buffer; NULL with "PATH: N bytes exceeds the MAX-byte limit" and the like. */
char *vx_read_file(const char *path, uint64_t max, size_t *len, mw_err *err);

#endif
