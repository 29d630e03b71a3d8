/* vindex/vx_gguf.h — GGUF v2/v3 reader (mmapped, fully validated) and writer.
 *
 * The reader treats the file as untrusted: every count, length, offset and type is bounded before
 * use, and a fault yields an error naming the file and the fault, never a crash, a hang or a huge
 * allocation. */
#ifndef VX_GGUF_H
#define VX_GGUF_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_meta.h"

#define VX_GGUF_MAX_DIMS 4

typedef struct vx_tensor {
    const char *name; /* NUL-terminated, owned by the reader */
    kn_type type;
    int n_dims;
    int64_t ne[VX_GGUF_MAX_DIMS]; /* ggml order, fastest first; unused dims are 1 */
    uint64_t offset;              /* absolute byte offset of the data in the file */
    uint64_t nbytes;
    const void *data; /* points into the mapping */
} vx_tensor;

typedef struct vx_gguf vx_gguf;

int vx_gguf_open(const char *path, vx_gguf **out, mw_err *err);
void vx_gguf_close(vx_gguf *g);

uint32_t vx_gguf_version(const vx_gguf *g);
const char *vx_gguf_path(const vx_gguf *g);
const vx_meta *vx_gguf_meta(const vx_gguf *g);
uint64_t vx_gguf_alignment(const vx_gguf *g);
uint64_t vx_gguf_data_offset(const vx_gguf *g);
uint64_t vx_gguf_file_size(const vx_gguf *g);
const uint8_t *vx_gguf_base(const vx_gguf *g); /* the whole mapping */
struct vx_file_id;
const struct vx_file_id *vx_gguf_file_id(const vx_gguf *g); /* the file as mapped */

size_t vx_gguf_n_tensors(const vx_gguf *g);
const vx_tensor *vx_gguf_tensor(const vx_gguf *g, size_t i);
const vx_tensor *vx_gguf_find(const vx_gguf *g, const char *name); /* NULL if absent */

/* Writer: collect metadata and tensors, then write a GGUF v3 file in one pass. Tensor data is
 * either copied from memory at add time or produced by a callback while writing (for models larger
 * than memory). */
typedef struct vx_gguf_writer vx_gguf_writer;
typedef int (*vx_gguf_fill_fn)(void *ctx, void *dst, uint64_t nbytes, mw_err *err);

vx_gguf_writer *vx_gguf_writer_new(uint32_t alignment);
void vx_gguf_writer_free(vx_gguf_writer *w);
vx_meta *vx_gguf_writer_meta(vx_gguf_writer *w);
int vx_gguf_writer_add(vx_gguf_writer *w, const char *name, kn_type type, int n_dims,
                       const int64_t *ne, const void *data, mw_err *err);
int vx_gguf_writer_add_fill(vx_gguf_writer *w, const char *name, kn_type type, int n_dims,
                            const int64_t *ne, vx_gguf_fill_fn fill, void *ctx, mw_err *err);
int vx_gguf_writer_write(vx_gguf_writer *w, const char *path, mw_err *err);

#endif
